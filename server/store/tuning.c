/* tuning.c - tuning jobs, trials and rung values; see tuning.h. */
#include "store/tuning.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/db.h"

static const char *const status_names[] = {"InProgress", "Completed", "Failed", "Stopping",
					   "Stopped"};
static const char *const trial_names[] = {"Pending", "InProgress", "Completed",
					  "Failed",  "Stopped",    "EarlyStopped"};
#define N_STATUS (sizeof(status_names) / sizeof(status_names[0]))
#define N_TRIAL (sizeof(trial_names) / sizeof(trial_names[0]))

const char *tuning_status_name(enum tuning_status s) { return status_names[s]; }
const char *tuning_trial_status_name(enum trial_status s) { return trial_names[s]; }

bool tuning_live(const struct tuning_job *t)
{
	return t->status == TUNING_IN_PROGRESS || t->status == TUNING_STOPPING;
}

static int parse_name(const char *const *names, size_t n, const unsigned char *text)
{
	for (size_t i = 0; text && i < n; i++)
		if (strcmp((const char *)text, names[i]) == 0)
			return (int)i;
	return 0;
}

static void copy_text(char *dst, size_t len, sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	snprintf(dst, len, "%s", t ? (const char *)t : "");
}

int tuning_create(struct db *db, int64_t user_id, const char *name, const char *spec,
		  int64_t now, int64_t *id)
{
	int rc;

	db_lock(db);
	rc = db_exec(db,
		     "INSERT INTO tuning_jobs (user_id, name, spec, status, created_at)"
		     " VALUES (?, ?, ?, 'InProgress', ?)",
		     "itti", user_id, name, spec, now);
	*id = rc == 1 ? db_last_id(db) : 0;
	db_unlock(db);
	return rc == 1 ? 0 : rc == DB_CONFLICT ? DB_CONFLICT : -1;
}

#define TUNING_COLUMNS                                                                             \
	"t.id, t.user_id, u.name, t.name, t.spec, t.status, t.reason, t.created_at, t.ended_at"   \
	" FROM tuning_jobs t JOIN users u ON u.id = t.user_id"

/* Fills *t; spec is borrowed from the statement (the row callback only). */
static void tuning_from_row(sqlite3_stmt *st, struct tuning_job *t)
{
	memset(t, 0, sizeof(*t));
	t->id = sqlite3_column_int64(st, 0);
	t->user_id = sqlite3_column_int64(st, 1);
	copy_text(t->user_name, sizeof(t->user_name), st, 2);
	copy_text(t->name, sizeof(t->name), st, 3);
	t->spec = (char *)sqlite3_column_text(st, 4);
	t->status = parse_name(status_names, N_STATUS, sqlite3_column_text(st, 5));
	copy_text(t->reason, sizeof(t->reason), st, 6);
	t->created_at = sqlite3_column_int64(st, 7);
	t->ended_at = sqlite3_column_int64(st, 8);
}

static int row_own(sqlite3_stmt *st, void *ctx)
{
	struct tuning_job *t = ctx;

	tuning_from_row(st, t);
	t->spec = strdup(t->spec ? t->spec : "{}");
	return 0;
}

int tuning_find_for(struct db *db, int64_t user_id, int64_t id, struct tuning_job *out)
{
	int rc = db_one(db, "SELECT " TUNING_COLUMNS " WHERE t.id = ? AND (? = 0 OR t.user_id = ?)",
			"iii", row_own, out, id, user_id, user_id);

	if (rc == 1 && !out->spec)
		return -1;
	return rc < 0 ? -1 : rc;
}

void tuning_row_free(struct tuning_job *t)
{
	free(t->spec);
	t->spec = NULL;
}

struct tuning_walk {
	int (*fn)(const struct tuning_job *t, void *ctx);
	void *ctx;
};

static int row_walk(sqlite3_stmt *st, void *arg)
{
	struct tuning_walk *w = arg;
	struct tuning_job t;

	tuning_from_row(st, &t);
	return w->fn(&t, w->ctx);
}

static int row_int64(sqlite3_stmt *st, void *ctx)
{
	*(int64_t *)ctx = sqlite3_column_int64(st, 0);
	return 0;
}

int tuning_list(struct db *db, int64_t user_id, int64_t limit, int64_t offset,
		int (*fn)(const struct tuning_job *t, void *ctx), void *ctx, int64_t *total)
{
	struct tuning_walk w = {fn, ctx};
	int rc;

	*total = 0;
	if (db_one(db, "SELECT count(*) FROM tuning_jobs WHERE ? = 0 OR user_id = ?", "ii",
		   row_int64, total, user_id, user_id) < 0)
		return -1;
	rc = db_each(db,
		     "SELECT " TUNING_COLUMNS " WHERE ? = 0 OR t.user_id = ?"
		     " ORDER BY t.id DESC LIMIT ? OFFSET ?",
		     "iiii", row_walk, &w, user_id, user_id, limit, offset);
	return rc < 0 ? -1 : rc;
}

int tuning_each_live(struct db *db, int (*fn)(const struct tuning_job *t, void *ctx), void *ctx)
{
	struct tuning_walk w = {fn, ctx};
	int rc = db_each(db,
			 "SELECT " TUNING_COLUMNS " WHERE t.status IN ('InProgress', 'Stopping')"
			 " ORDER BY t.id",
			 "", row_walk, &w);
	return rc < 0 ? -1 : rc;
}

int tuning_move(struct db *db, int64_t id, enum tuning_status status, const char *reason,
		unsigned from_mask, int64_t now)
{
	bool ended = status != TUNING_IN_PROGRESS && status != TUNING_STOPPING;
	int rc;

	db_lock(db);
	rc = db_exec(db,
		     "UPDATE tuning_jobs SET status = ?, reason = CASE WHEN ? = '' THEN reason"
		     " ELSE ? END, ended_at = ? WHERE id = ? AND"
		     " (? >> (CASE status WHEN 'InProgress' THEN 0 WHEN 'Completed' THEN 1"
		     " WHEN 'Failed' THEN 2 WHEN 'Stopping' THEN 3 ELSE 4 END)) & 1",
		     "tttiii", status_names[status], reason ? reason : "", reason ? reason : "",
		     ended ? now : (int64_t)0, id, (int64_t)from_mask);
	db_unlock(db);
	return rc < 0 ? -1 : rc > 0;
}

int tuning_trial_add(struct db *db, const struct tuning_trial *t)
{
	int rc;

	db_lock(db);
	rc = db_exec(db,
		     "INSERT INTO tuning_trials (tuning_id, idx, job_name, parameters, status,"
		     " created_at_ms) VALUES (?, ?, ?, ?, 'Pending', ?)",
		     "iitti", t->tuning_id, (int64_t)t->index, t->job_name, t->parameters,
		     t->created_at_ms);
	db_unlock(db);
	return rc == 1 ? 0 : rc == DB_CONFLICT ? DB_CONFLICT : -1;
}

struct trial_walk {
	int (*fn)(const struct tuning_trial *t, void *ctx);
	void *ctx;
};

static int row_trial(sqlite3_stmt *st, void *arg)
{
	struct trial_walk *w = arg;
	struct tuning_trial t;

	memset(&t, 0, sizeof(t));
	t.tuning_id = sqlite3_column_int64(st, 0);
	t.index = sqlite3_column_int(st, 1);
	t.job_id = sqlite3_column_int64(st, 2);
	copy_text(t.job_name, sizeof(t.job_name), st, 3);
	copy_text(t.parameters, sizeof(t.parameters), st, 4);
	t.status = parse_name(trial_names, N_TRIAL, sqlite3_column_text(st, 5));
	t.has_objective = sqlite3_column_type(st, 6) != SQLITE_NULL;
	t.objective = t.has_objective ? sqlite3_column_double(st, 6) : 0;
	copy_text(t.reason, sizeof(t.reason), st, 7);
	t.rung = sqlite3_column_int(st, 8);
	t.created_at_ms = sqlite3_column_int64(st, 9);
	t.started_at = sqlite3_column_int64(st, 10);
	t.ended_at = sqlite3_column_int64(st, 11);
	return w->fn(&t, w->ctx);
}

int tuning_trials_each(struct db *db, int64_t tuning_id,
		       int (*fn)(const struct tuning_trial *t, void *ctx), void *ctx)
{
	struct trial_walk w = {fn, ctx};
	int rc = db_each(db,
			 "SELECT tuning_id, idx, job_id, job_name, parameters, status, objective,"
			 " reason, rung, created_at_ms, started_at, ended_at FROM tuning_trials"
			 " WHERE tuning_id = ? ORDER BY idx",
			 "i", row_trial, &w, tuning_id);
	return rc < 0 ? -1 : rc;
}

int tuning_trial_put(struct db *db, const struct tuning_trial *t)
{
	int rc;

	db_lock(db);
	if (t->has_objective)
		rc = db_exec(db,
			     "UPDATE tuning_trials SET job_id = ?, status = ?, objective = ?,"
			     " reason = ?, rung = ?, started_at = ?, ended_at = ?"
			     " WHERE tuning_id = ? AND idx = ?",
			     "itdtiiiii", t->job_id, trial_names[t->status], t->objective, t->reason,
			     (int64_t)t->rung, t->started_at, t->ended_at, t->tuning_id,
			     (int64_t)t->index);
	else
		rc = db_exec(db,
			     "UPDATE tuning_trials SET job_id = ?, status = ?, objective = NULL,"
			     " reason = ?, rung = ?, started_at = ?, ended_at = ?"
			     " WHERE tuning_id = ? AND idx = ?",
			     "ittiiiii", t->job_id, trial_names[t->status], t->reason,
			     (int64_t)t->rung, t->started_at, t->ended_at, t->tuning_id,
			     (int64_t)t->index);
	db_unlock(db);
	return rc < 0 ? -1 : 0;
}

int tuning_rung_put(struct db *db, int64_t tuning_id, int rung, int index, double value)
{
	int rc;

	db_lock(db);
	rc = db_exec(db,
		     "INSERT OR REPLACE INTO tuning_rungs (tuning_id, rung, idx, value)"
		     " VALUES (?, ?, ?, ?)",
		     "iiid", tuning_id, (int64_t)rung, (int64_t)index, value);
	db_unlock(db);
	return rc < 0 ? -1 : 0;
}

struct values {
	double *v;
	int n, max;
};

static int row_value(sqlite3_stmt *st, void *arg)
{
	struct values *w = arg;

	if (w->n >= w->max)
		return 1;
	w->v[w->n++] = sqlite3_column_double(st, 0);
	return 0;
}

int tuning_rung_values(struct db *db, int64_t tuning_id, int rung, double *values, int max)
{
	struct values w = {values, 0, max};

	if (db_each(db, "SELECT value FROM tuning_rungs WHERE tuning_id = ? AND rung = ?", "ii",
		    row_value, &w, tuning_id, (int64_t)rung) < 0)
		return -1;
	return w.n;
}

int64_t tuning_metric_count(struct db *db, int64_t job_id, const char *metric)
{
	int64_t n = 0;

	if (db_one(db, "SELECT count(*) FROM job_metrics WHERE job_id = ? AND name = ?", "it",
		   row_int64, &n, job_id, metric) != 1)
		return -1;
	return n;
}

static int row_double(sqlite3_stmt *st, void *ctx)
{
	*(double *)ctx = sqlite3_column_double(st, 0);
	return 0;
}

int tuning_metric_point(struct db *db, int64_t job_id, const char *metric, int64_t n,
			double *value)
{
	/* in time order, points of one read in the order they were added */
	int rc = n < 0 ? db_one(db,
				"SELECT value FROM job_metrics WHERE job_id = ? AND name = ?"
				" ORDER BY at_ms DESC, rowid DESC LIMIT 1",
				"it", row_double, value, job_id, metric)
		       : db_one(db,
				"SELECT value FROM job_metrics WHERE job_id = ? AND name = ?"
				" ORDER BY at_ms, rowid LIMIT 1 OFFSET ?",
				"iti", row_double, value, job_id, metric, n);
	return rc < 0 ? -1 : rc;
}
