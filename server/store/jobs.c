/* jobs.c - training job rows and their transitions; see jobs.h. */
#include "store/jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/db.h"
#include "store/job_storage.h"
#include "store/ledger.h"

static const char *const status_names[] = {"InProgress", "Completed", "Failed", "Stopping",
					   "Stopped"};
static const char *const secondary_names[] = {
	"Pending",   "Starting", "Downloading", "Training",	  "Uploading",		 "Completed",
	"Failed",    "Stopping", "Stopped",	"MaxRuntimeExceeded", "MaxWaitTimeExceeded", "Interrupted",
};
#define N_STATUS (sizeof(status_names) / sizeof(status_names[0]))
#define N_SECONDARY (sizeof(secondary_names) / sizeof(secondary_names[0]))

const char *jobs_status_name(enum job_status s) { return status_names[s]; }
const char *jobs_secondary_name(enum job_secondary s) { return secondary_names[s]; }

bool jobs_live(const struct job *j)
{
	return j->status == JOB_IN_PROGRESS || j->status == JOB_STOPPING;
}

int jobs_status_parse(const char *name, enum job_status *out)
{
	for (size_t i = 0; i < N_STATUS; i++)
		if (strcmp(name, status_names[i]) == 0) {
			*out = (enum job_status)i;
			return 0;
		}
	return -1;
}

int jobs_secondary_parse(const char *name, enum job_secondary *out)
{
	for (size_t i = 0; i < N_SECONDARY; i++)
		if (strcmp(name, secondary_names[i]) == 0) {
			*out = (enum job_secondary)i;
			return 0;
		}
	return -1;
}

/* The secondary statuses billed to the job: Starting through Uploading, and
 * Stopping (the command runs on through its grace). */
static bool billed(enum job_secondary s)
{
	return (s >= JOB_STARTING && s <= JOB_UPLOADING) || s == JOB_S_STOPPING;
}

/* The columns of a job row with spec_column as its spec: "j.spec", or "NULL"
 * for a listing, which never reads specs (up to ~1 MiB each, under the lock). */
#define JOB_COLUMNS_WITH(spec_column)                                                              \
	"j.id, j.user_id, u.name, j.name, j.status, j.secondary, " spec_column ", j.kind,"         \
	" j.gpu_count,"                                                                            \
	" j.image, j.pool_id, j.reused_pool, j.attempt, j.max_retries, j.max_runtime_s,"           \
	" j.max_wait_s, j.keep_alive_s, j.created_at, j.started_at, j.ended_at,"                   \
	" coalesce(j.exit_code, -1), j.failure_reason, j.memory_bytes, j.cpus_milli, j.network,"   \
	" j.run_sent, j.grace_s, j.training_ms, j.warm_status, j.warm_from, j.warm_to,"            \
	" j.warm_until, j.warm_reason, j.reused_by,"                                               \
	" j.capacity, j.preempting, j.preempt_at_ms, j.preemptions, j.gpu_kind"                    \
	" FROM jobs j JOIN users u ON u.id = j.user_id"
#define JOB_COLUMNS JOB_COLUMNS_WITH("j.spec")
#define LIVE "j.status IN ('InProgress', 'Stopping')"

static void copy_text(char *dst, size_t len, sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	snprintf(dst, len, "%s", t ? (const char *)t : "");
}

/* Fills *j from the row; spec is borrowed from the statement (valid for the
 * row callback only). */
static void job_from_row(sqlite3_stmt *st, struct job *j)
{
	int c = 0;

	memset(j, 0, sizeof(*j));
	j->id = sqlite3_column_int64(st, c++);
	j->user_id = sqlite3_column_int64(st, c++);
	copy_text(j->user_name, sizeof(j->user_name), st, c++);
	copy_text(j->name, sizeof(j->name), st, c++);
	jobs_status_parse((const char *)sqlite3_column_text(st, c++), &j->status);
	jobs_secondary_parse((const char *)sqlite3_column_text(st, c++), &j->secondary);
	j->spec = (char *)sqlite3_column_text(st, c++);
	j->gpu = strcmp((const char *)sqlite3_column_text(st, c++), "gpu") == 0;
	j->gpu_count = sqlite3_column_int(st, c++);
	copy_text(j->image, sizeof(j->image), st, c++);
	j->pool_id = sqlite3_column_int64(st, c++);
	j->reused_pool = sqlite3_column_int(st, c++) != 0;
	j->attempt = sqlite3_column_int(st, c++);
	j->max_retries = sqlite3_column_int(st, c++);
	j->max_runtime_s = sqlite3_column_int64(st, c++);
	j->max_wait_s = sqlite3_column_int64(st, c++);
	j->keep_alive_s = sqlite3_column_int64(st, c++);
	j->created_at = sqlite3_column_int64(st, c++);
	j->started_at = sqlite3_column_int64(st, c++);
	j->ended_at = sqlite3_column_int64(st, c++);
	j->exit_code = sqlite3_column_int(st, c++);
	copy_text(j->failure_reason, sizeof(j->failure_reason), st, c++);
	j->memory_bytes = sqlite3_column_int64(st, c++);
	j->cpus_milli = sqlite3_column_int64(st, c++);
	j->network = sqlite3_column_int(st, c++) != 0;
	j->run_sent = sqlite3_column_int(st, c++) != 0;
	j->grace_s = sqlite3_column_int64(st, c++);
	j->training_ms = sqlite3_column_int64(st, c++);
	copy_text(j->warm_status, sizeof(j->warm_status), st, c++);
	j->warm_from = sqlite3_column_int64(st, c++);
	j->warm_to = sqlite3_column_int64(st, c++);
	j->warm_until = sqlite3_column_int64(st, c++);
	copy_text(j->warm_reason, sizeof(j->warm_reason), st, c++);
	j->reused_by = sqlite3_column_int64(st, c++);
	j->preemptible = strcmp((const char *)sqlite3_column_text(st, c++), "preemptible") == 0;
	copy_text(j->preempting, sizeof(j->preempting), st, c++);
	j->preempt_at_ms = sqlite3_column_int64(st, c++);
	j->preemptions = sqlite3_column_int(st, c++);
	copy_text(j->gpu_kind, sizeof(j->gpu_kind), st, c++);
}

/* A db_row_fn copying the row into out with its own spec. */
static int job_copy_row(sqlite3_stmt *st, void *out)
{
	struct job *j = out;

	job_from_row(st, j);
	j->spec = strdup(j->spec ? j->spec : "{}");
	return 0;
}

void jobs_row_free(struct job *j)
{
	free(j->spec);
	j->spec = NULL;
}

int jobs_find(struct db *db, int64_t id, struct job *out)
{
	return jobs_find_for(db, 0, id, out);
}

int jobs_find_for(struct db *db, int64_t user_id, int64_t id, struct job *out)
{
	int rc = db_one(db, "SELECT " JOB_COLUMNS " WHERE j.id = ? AND (? = 0 OR j.user_id = ?)",
			"iii", job_copy_row, out, id, user_id, user_id);

	if (rc == 1 && !out->spec)
		return -1;
	return rc < 0 ? -1 : rc;
}

struct job_walk {
	int (*fn)(const struct job *j, void *ctx);
	void *ctx;
};

static int job_row(sqlite3_stmt *st, void *arg)
{
	struct job_walk *w = arg;
	struct job j;

	job_from_row(st, &j);
	return w->fn(&j, w->ctx);
}

/* Waiting for a pool: Pending, or Starting again without one (a retry). */
#define WAITING "(j.status = 'InProgress' AND (j.secondary = 'Pending' OR" \
		" (j.secondary = 'Starting' AND j.pool_id = 0)))"

int jobs_each_live(struct db *db, int (*fn)(const struct job *j, void *ctx), void *ctx)
{
	struct job_walk w = {fn, ctx};
	/* The jobs that hold or build a pool first (few: pools are capped), then
	 * the waiting ones in turns: each user's first, then each user's second,
	 * ... A caller that reads only the first N (a pass's bound) sees every
	 * running job and every user's head, whoever submitted a thousand jobs. */
	return db_each(db,
		       "SELECT " JOB_COLUMNS " WHERE " LIVE " ORDER BY " WAITING ","
		       " row_number() OVER (PARTITION BY j.user_id, " WAITING " ORDER BY j.id),"
		       " j.id",
		       "", job_row, &w) < 0
		       ? -1
		       : 0;
}

struct overdue_ids {
	int64_t *ids;
	size_t n, max;
};

static int id_row(sqlite3_stmt *st, void *arg)
{
	struct overdue_ids *w = arg;

	w->ids[w->n++] = sqlite3_column_int64(st, 0);
	return w->n == w->max;
}

int jobs_overdue_pending(struct db *db, int64_t now, int64_t *ids, size_t max)
{
	struct overdue_ids w = {ids, 0, max};

	if (max == 0)
		return 0;
	return db_each(db,
		       "SELECT id FROM jobs WHERE status = 'InProgress' AND secondary = 'Pending'"
		       " AND created_at + max_wait_s < ? ORDER BY id",
		       "i", id_row, &w, now) < 0
		       ? -1
		       : (int)w.n;
}

int jobs_count_live(struct db *db, int64_t user_id)
{
	int n = 0;

	if (db_one(db, "SELECT count(*) FROM jobs j WHERE j.user_id = ? AND " LIVE, "i", db_row_int,
		   &n, user_id) != 1)
		return -1;
	return n;
}

static int add_transition(struct db *db, int64_t id, enum job_secondary s, int64_t at_ms,
			  const char *message)
{
	return db_exec(db,
		       "INSERT INTO job_transitions (job_id, secondary, start_at_ms, message)"
		       " VALUES (?, ?, ?, ?)",
		       "itit", id, secondary_names[s], at_ms, message ? message : "") == 1
		       ? 0
		       : -1;
}

/* Whether the user's kept job data leaves room for a spec of spec_bytes
 * (inside the inserting transaction). 0, JOBS_CREATE_STORAGE, or -1. */
static int storage_room(struct db *db, const struct job_new *n, int64_t spec_bytes)
{
	struct job_storage_use use;

	if (n->max_stored_bytes <= 0)
		return 0;
	if (job_storage_of_user(db, n->user_id, &use) < 0)
		return -1;
	return use.total_bytes + spec_bytes > n->max_stored_bytes ? JOBS_CREATE_STORAGE : 0;
}

int jobs_create(struct db *db, const struct job_new *n, struct job *out)
{
	int rc = -1, live = 0;
	int64_t id = 0, spec_bytes = (int64_t)strlen(n->spec);

	db_lock(db);
	if (db_begin(db) < 0)
		goto unlock;
	/* counted in the inserting transaction: two submits never both pass */
	if (n->max_live >= 0 &&
	    (db_one(db, "SELECT count(*) FROM jobs j WHERE j.user_id = ? AND " LIVE, "i",
		    db_row_int, &live, n->user_id) != 1 ||
	     live >= n->max_live)) {
		rc = live >= n->max_live ? JOBS_CREATE_QUOTA : -1;
		db_rollback(db);
		goto unlock;
	}
	if ((rc = storage_room(db, n, spec_bytes)) < 0) {
		db_rollback(db);
		goto unlock;
	}
	rc = db_exec(db,
		     "INSERT INTO jobs (user_id, name, status, secondary, spec, kind, gpu_count,"
		     " image, memory_bytes, cpus_milli, network, max_retries, max_runtime_s,"
		     " max_wait_s, keep_alive_s, grace_s, created_at, capacity, gpu_kind)"
		     " VALUES (?, ?, 'InProgress', 'Pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
		     " ?)",
		     "itttitiiiiiiiiitt", n->user_id, n->name, n->spec, n->gpu ? "gpu" : "cpu",
		     (int64_t)n->gpu_count, n->image ? n->image : "", n->memory_bytes,
		     n->cpus_milli, (int64_t)n->network, (int64_t)n->max_retries, n->max_runtime_s,
		     n->max_wait_s, n->keep_alive_s, n->grace_s, n->now_ms / 1000,
		     n->preemptible ? "preemptible" : "on-demand",
		     n->gpu_kind && n->gpu_kind[0] ? n->gpu_kind : "whole");
	id = db_last_id(db);
	if (rc != 1 || add_transition(db, id, JOB_PENDING, n->now_ms, "queued") < 0 ||
	    db_exec(db, "INSERT INTO job_storage (job_id, user_id, spec_bytes) VALUES (?, ?, ?)",
		    "iii", id, n->user_id, spec_bytes) != 1) {
		db_rollback(db);
		rc = rc == DB_CONFLICT ? DB_CONFLICT : -1;
		goto unlock;
	}
	rc = db_commit(db) < 0 ? -1 : 0;
unlock:
	db_unlock(db);
	if (rc == 0 && jobs_find(db, id, out) != 1)
		rc = -1;
	return rc;
}

static int row_int64(sqlite3_stmt *st, void *ctx)
{
	*(int64_t *)ctx = sqlite3_column_int64(st, 0);
	return 0;
}

/* The job's ledger entry of this attempt: opened at now (once), closed at now. */
static int ledger_open_job(struct db *db, int64_t id, int64_t now)
{
	char plan[LEDGER_PLAN_MAX];
	int64_t user_id = 0;
	int found = 0;

	if (db_one(db, "SELECT count(*) FROM ledger WHERE job_id = ? AND end_at IS NULL", "i",
		   db_row_int, &found, id) != 1)
		return -1;
	if (found)
		return 0;
	if (db_one(db, "SELECT user_id FROM jobs WHERE id = ?", "i", row_int64, &user_id, id) != 1)
		return -1;
	ledger_plan_of(db, user_id, plan);
	/* a preemptible entry bills its plan's fraction of each second; a job on N hosts
	 * (its instance_count) runs N sandboxes alike, and each second bills N */
	return db_exec(db,
		       "INSERT INTO ledger (job_id, pool_id, source, user_id, user_name, kind, gpus,"
		       " plan, start_at, last_heartbeat, capacity, rate, fraction_milli, hosts)"
		       " SELECT j.id, j.pool_id, 'job', j.user_id, u.name, j.kind,"
		       " coalesce((SELECT gpus FROM pools WHERE id = j.pool_id), ''), ?, ?, ?,"
		       " j.capacity, CASE j.capacity WHEN 'preemptible' THEN ? ELSE 1 END"
		       " * max(1, coalesce(json_extract(j.spec, '$.instance_count'), 1)),"
		       " coalesce((SELECT gpu_fraction_milli FROM pools WHERE id = j.pool_id), 1000),"
		       " max(1, coalesce(json_extract(j.spec, '$.instance_count'), 1))"
		       " FROM jobs j JOIN users u ON u.id = j.user_id WHERE j.id = ?",
		       "tiidi", plan, now, now, ledger_preemptible_rate_of(db, user_id), id) == 1
		       ? 0
		       : -1;
}

static int ledger_close_job(struct db *db, int64_t id, int64_t now, const char *reason)
{
	return ledger_close_source(db, "job", id, now, reason) < 0 ? -1 : 0;
}

/* Whether the move's phase opens a ledger entry. After a preemption the
 * job's Starting and Downloading again are not billed: you pay for one
 * download (docs/jobs.md "Preemptible capacity"); its entry opens with
 * Training. */
static bool bills(const struct job *j, const struct job_move *m)
{
	bool resumed = j->preemptions > 0 || m->preempted;

	return billed(m->secondary) &&
	       !(resumed && (m->secondary == JOB_STARTING || m->secondary == JOB_DOWNLOADING));
}

/* The interruption rows a move closes: requeued (a preemption's end), resumed
 * (on a pool again). */
static int mark_interruption(struct db *db, const struct job *j, const struct job_move *m)
{
	if (m->preempted)
		return db_exec(db,
			       "UPDATE job_interruptions SET requeued_at_ms = ?"
			       " WHERE job_id = ? AND requeued_at_ms IS NULL",
			       "ii", m->at_ms, j->id) < 0 ? -1 : 0;
	if (j->preemptions > 0 && j->secondary == JOB_PENDING && m->secondary != JOB_PENDING)
		return db_exec(db,
			       "UPDATE job_interruptions SET resumed_at_ms = ?"
			       " WHERE job_id = ? AND resumed_at_ms IS NULL AND requeued_at_ms IS NOT NULL",
			       "ii", m->at_ms, j->id) < 0 ? -1 : 0;
	return 0;
}

/* The bookkeeping of one move inside its transaction. */
static int apply_move(struct db *db, const struct job *j, const struct job_move *m)
{
	int64_t now = m->at_ms / 1000;
	bool ending = m->status != JOB_IN_PROGRESS && m->status != JOB_STOPPING;
	const char *reason = ending ? secondary_names[m->secondary]
			     : m->preempted ? "preempted" : "retried";

	if (db_exec(db,
		    "UPDATE job_transitions SET end_at_ms = max(start_at_ms, ?)"
		    " WHERE job_id = ? AND end_at_ms IS NULL",
		    "ii", m->at_ms, j->id) < 0 ||
	    add_transition(db, j->id, m->secondary, m->at_ms, m->message) < 0)
		return -1;
	if ((m->next_attempt || !bills(j, m)) && ledger_close_job(db, j->id, now, reason) < 0)
		return -1;
	if (mark_interruption(db, j, m) < 0)
		return -1;
	/* the retention sweep orders ended jobs by this (job_storage.h) */
	if (ending && db_exec(db, "UPDATE job_storage SET ended_at = ? WHERE job_id = ?", "ii",
			      now, j->id) < 0)
		return -1;
	if (bills(j, m) && ledger_open_job(db, j->id, now) < 0)
		return -1;
	return 0;
}

int jobs_move(struct db *db, int64_t id, const struct job_move *m)
{
	struct job j;
	int rc = -1;
	int64_t training_since_ms = 0;
	bool ending = m->status != JOB_IN_PROGRESS && m->status != JOB_STOPPING;

	db_lock(db);
	if (db_begin(db) < 0)
		goto unlock;
	rc = jobs_find(db, id, &j);
	if (rc != 1 || !jobs_live(&j) || (m->from_mask && !(m->from_mask & (1u << j.secondary)))) {
		if (rc == 1)
			jobs_row_free(&j);
		db_rollback(db);
		rc = rc < 0 ? -1 : 0;
		goto unlock;
	}
	/* time in Training, so the API can say how long the command ran */
	if (j.secondary == JOB_TRAINING && m->secondary != JOB_TRAINING)
		db_one(db,
		       "SELECT start_at_ms FROM job_transitions WHERE job_id = ? AND end_at_ms IS NULL"
		       " ORDER BY id DESC LIMIT 1",
		       "i", row_int64, &training_since_ms, id);
	rc = db_exec(db,
		     "UPDATE jobs SET status = ?, secondary = ?,"
		     " pool_id = CASE WHEN ? > 0 THEN ? WHEN ? THEN 0 ELSE pool_id END,"
		     " reused_pool = CASE WHEN ? > 0 THEN ? ELSE reused_pool END,"
		     " attempt = attempt + ?, run_sent = CASE WHEN ? OR ? THEN 0 ELSE run_sent END,"
		     " preemptions = preemptions + ?,"
		     " preempting = CASE WHEN ? THEN '' ELSE preempting END,"
		     " exit_code = CASE WHEN ? THEN nullif(?, -1) ELSE exit_code END,"
		     " failure_reason = coalesce(?, failure_reason),"
		     " started_at = CASE WHEN started_at = 0 AND ? IN ('Starting', 'Downloading')"
		     "   THEN ? ELSE started_at END,"
		     " ended_at = CASE WHEN ? THEN ? ELSE ended_at END,"
		     " training_ms = training_ms + CASE WHEN ? > 0 THEN max(0, ? - ?) ELSE 0 END"
		     " WHERE id = ?",
		     "ttiiiiiiiiiiiitt" "iiiiii" "i",
		     status_names[m->status], secondary_names[m->secondary], m->pool_id, m->pool_id,
		     (int64_t)m->clear_pool,
		     m->pool_id, (int64_t)m->reused_pool, (int64_t)m->next_attempt,
		     (int64_t)m->next_attempt, (int64_t)m->preempted, (int64_t)m->preempted,
		     (int64_t)(m->preempted || ending), (int64_t)m->set_exit, (int64_t)m->exit_code,
		     m->failure, secondary_names[m->secondary], m->at_ms / 1000, (int64_t)ending,
		     m->at_ms / 1000, training_since_ms, m->at_ms, training_since_ms, id);
	jobs_row_free(&j);
	if (rc != 1 || apply_move(db, &j, m) < 0) {
		db_rollback(db);
		rc = -1;
		goto unlock;
	}
	rc = db_commit(db) < 0 ? -1 : 1;
unlock:
	db_unlock(db);
	return rc;
}

int jobs_set_wait_message(struct db *db, int64_t id, const char *message)
{
	db_lock(db);
	int rc = db_exec(db,
			 "UPDATE job_transitions SET message = ? WHERE job_id = ? AND end_at_ms IS NULL"
			 " AND message <> ? AND (SELECT secondary FROM jobs WHERE id = ?) = 'Pending'",
			 "titi", message, id, message, id);
	db_unlock(db);
	return rc < 0 ? -1 : rc > 0;
}

int jobs_set_run_sent(struct db *db, int64_t id, bool sent)
{
	db_lock(db);
	int rc = db_exec(db, "UPDATE jobs SET run_sent = ? WHERE id = ?", "ii", (int64_t)sent, id);
	db_unlock(db);
	return rc < 0 ? -1 : 0;
}

int jobs_set_pool(struct db *db, int64_t id, int64_t pool_id)
{
	db_lock(db);
	int rc = db_exec(db,
			 "UPDATE jobs SET pool_id = ? WHERE id = ? AND status = 'InProgress'"
			 " AND secondary = 'Starting'",
			 "ii", pool_id, id);
	db_unlock(db);
	return rc < 0 ? -1 : rc > 0;
}

struct waiting_walk {
	int (*fn)(const struct job_waiting_gpu *w, void *ctx);
	void *ctx;
};

static int waiting_row(sqlite3_stmt *st, void *arg)
{
	struct waiting_walk *w = arg;
	struct job_waiting_gpu j = {
		.job_id = sqlite3_column_int64(st, 0), .user_id = sqlite3_column_int64(st, 1),
		.created_at = sqlite3_column_int64(st, 2),
		.expires_at = sqlite3_column_int64(st, 2) + sqlite3_column_int64(st, 3),
		.length_s = sqlite3_column_int64(st, 4), .gpu_count = sqlite3_column_int(st, 5)};

	copy_text(j.gpu_kind, sizeof(j.gpu_kind), st, 6);
	return w->fn(&j, w->ctx);
}

int jobs_each_waiting_gpu(struct db *db, int (*fn)(const struct job_waiting_gpu *w, void *ctx),
			  void *ctx)
{
	struct waiting_walk w = {fn, ctx};
	/* Each user's first waiting job, then each user's second, ...: a caller
	 * that reads only the first N (a pass's bound) still sees every user's
	 * head, so the fair order is taken among users, not among the N oldest
	 * jobs (which could all be one user's). */
	return db_each(db,
		       "SELECT id, user_id, created_at, max_wait_s, max_runtime_s, gpu_count, gpu_kind FROM"
		       " (SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY id) AS turn"
		       " FROM jobs WHERE kind = 'gpu' AND capacity = 'on-demand'"
		       " AND status = 'InProgress' AND (secondary ="
		       " 'Pending' OR (secondary = 'Starting' AND pool_id = 0))) ORDER BY turn, id",
		       "", waiting_row, &w) < 0
		       ? -1
		       : 0;
}

int jobs_set_grace(struct db *db, int64_t id, int64_t grace_s)
{
	db_lock(db);
	int rc = db_exec(db, "UPDATE jobs SET grace_s = ? WHERE id = ?", "ii", grace_s, id);
	db_unlock(db);
	return rc < 0 ? -1 : 0;
}

int jobs_set_warm(struct db *db, int64_t id, const char *status, int64_t from, int64_t to,
		  int64_t until, const char *reason, int64_t reused_by)
{
	db_lock(db);
	int rc = db_exec(db,
			 "UPDATE jobs SET warm_status = coalesce(?, warm_status),"
			 " warm_from = CASE WHEN ? > 0 THEN ? ELSE warm_from END,"
			 " warm_to = CASE WHEN ? > 0 THEN ? ELSE warm_to END,"
			 " warm_until = CASE WHEN ? > 0 THEN ? ELSE warm_until END,"
			 " warm_reason = coalesce(?, warm_reason),"
			 " reused_by = CASE WHEN ? > 0 THEN ? ELSE reused_by END WHERE id = ?",
			 "tiiiiiitiii", status, from, from, to, to, until, until, reason, reused_by,
			 reused_by, id);
	db_unlock(db);
	return rc < 0 ? -1 : 0;
}

struct transition_walk {
	int (*fn)(const struct job_transition *t, void *ctx);
	void *ctx;
};

static int transition_row(sqlite3_stmt *st, void *arg)
{
	struct transition_walk *w = arg;
	struct job_transition t;

	memset(&t, 0, sizeof(t));
	jobs_secondary_parse((const char *)sqlite3_column_text(st, 0), &t.secondary);
	t.start_at_ms = sqlite3_column_int64(st, 1);
	t.end_at_ms = sqlite3_column_int64(st, 2);
	copy_text(t.message, sizeof(t.message), st, 3);
	return w->fn(&t, w->ctx);
}

int jobs_each_transition(struct db *db, int64_t id,
			 int (*fn)(const struct job_transition *t, void *ctx), void *ctx)
{
	struct transition_walk w = {fn, ctx};
	int rc = db_each(db,
			 "SELECT secondary, start_at_ms, coalesce(end_at_ms, 0), message"
			 " FROM job_transitions WHERE job_id = ? ORDER BY id",
			 "i", transition_row, &w, id);
	return rc < 0 ? -1 : rc;
}

int64_t jobs_billable_s(struct db *db, int64_t id, int64_t now)
{
	int64_t total = 0;

	/* an open entry counts up to now: the job is known to run */
	db_one(db,
	       "SELECT coalesce(sum(CASE WHEN end_at IS NULL THEN max(0, ? - start_at)"
	       " ELSE billable_s END), 0) FROM ledger WHERE job_id = ? AND source = 'job'",
	       "ii", row_int64, &total, now, id);
	return total;
}

static int row_int64_round(sqlite3_stmt *st, void *ctx)
{
	*(int64_t *)ctx = (int64_t)(sqlite3_column_double(st, 0) + 0.5);
	return 0;
}

int64_t jobs_charged_s(struct db *db, int64_t id, int64_t now)
{
	int64_t total = 0;

	db_one(db,
	       "SELECT coalesce(total(rate * CASE WHEN end_at IS NULL THEN max(0, ? - start_at)"
	       " ELSE billable_s END), 0) FROM ledger WHERE job_id = ? AND source = 'job'",
	       "ii", row_int64_round, &total, now, id);
	return total;
}

int jobs_preempt_begin(struct db *db, int64_t id, const char *waiting, int64_t at_ms)
{
	int rc;

	db_lock(db);
	if (db_begin(db) < 0) {
		db_unlock(db);
		return -1;
	}
	rc = db_exec(db,
		     "UPDATE jobs SET preempting = ?, preempt_at_ms = ? WHERE id = ?"
		     " AND capacity = 'preemptible' AND status = 'InProgress' AND preempting = ''",
		     "tii", waiting, at_ms, id);
	if (rc == 1 && db_exec(db,
			       "INSERT INTO job_interruptions (job_id, reason, waiting, at_ms)"
			       " VALUES (?, 'Preempted', ?, ?)",
			       "iti", id, waiting, at_ms) != 1)
		rc = -1;
	if (rc != 1)
		db_rollback(db);
	else if (db_commit(db) < 0)
		rc = -1;
	db_unlock(db);
	return rc < 0 ? -1 : rc;
}

struct preemptible_walk {
	int (*fn)(const struct job_on_pool *v, void *ctx);
	void *ctx;
};

static int preemptible_row(sqlite3_stmt *st, void *arg)
{
	struct preemptible_walk *w = arg;
	struct job_on_pool v = {
		.id = sqlite3_column_int64(st, 0), .user_id = sqlite3_column_int64(st, 1),
		.pool_id = sqlite3_column_int64(st, 2), .grace_s = sqlite3_column_int64(st, 3),
		.preempt_at_ms = sqlite3_column_int64(st, 4),
		.gpu_count = sqlite3_column_int(st, 6), .run_sent = sqlite3_column_int(st, 7) != 0,
		.preempting = sqlite3_column_int(st, 8) != 0};

	copy_text(v.user_name, sizeof(v.user_name), st, 5);
	copy_text(v.gpu_kind, sizeof(v.gpu_kind), st, 9);
	return w->fn(&v, w->ctx);
}

int jobs_each_preemptible(struct db *db, int (*fn)(const struct job_on_pool *v, void *ctx),
			  void *ctx)
{
	struct preemptible_walk w = {fn, ctx};
	int rc = db_each(db,
			 "SELECT j.id, j.user_id, j.pool_id, j.grace_s, j.preempt_at_ms, u.name,"
			 " CASE j.kind WHEN 'gpu' THEN j.gpu_count ELSE 0 END, j.run_sent,"
			 " j.preempting <> '', j.gpu_kind FROM jobs j JOIN users u ON u.id = j.user_id"
			 " WHERE j.capacity = 'preemptible' AND j.status = 'InProgress'"
			 " AND j.secondary IN ('Starting', 'Downloading', 'Training')"
			 " AND j.pool_id > 0 ORDER BY j.id DESC",
			 "", preemptible_row, &w);
	return rc < 0 ? -1 : rc;
}

int jobs_preemptible_gpus_of(struct db *db, int64_t user_id)
{
	int n = 0;

	if (db_one(db,
		   "SELECT coalesce(sum(gpu_count), 0) FROM jobs WHERE user_id = ? AND kind = 'gpu'"
		   " AND capacity = 'preemptible' AND status = 'InProgress' AND pool_id > 0",
		   "i", db_row_int, &n, user_id) != 1)
		return -1;
	return n;
}

int jobs_count_waiting_on_demand(struct db *db)
{
	int n = 0;

	if (db_one(db,
		   "SELECT count(*) FROM jobs WHERE status = 'InProgress' AND capacity = 'on-demand'"
		   " AND (secondary = 'Pending' OR (secondary = 'Starting' AND pool_id = 0))",
		   "", db_row_int, &n) != 1)
		return -1;
	return n;
}

struct interruption_walk {
	int (*fn)(const struct job_interruption *x, void *ctx);
	void *ctx;
};

static int interruption_row(sqlite3_stmt *st, void *arg)
{
	struct interruption_walk *w = arg;
	struct job_interruption x;

	memset(&x, 0, sizeof(x));
	copy_text(x.reason, sizeof(x.reason), st, 0);
	copy_text(x.waiting, sizeof(x.waiting), st, 1);
	x.at_ms = sqlite3_column_int64(st, 2);
	x.requeued_at_ms = sqlite3_column_int64(st, 3);
	x.resumed_at_ms = sqlite3_column_int64(st, 4);
	return w->fn(&x, w->ctx);
}

int jobs_each_interruption(struct db *db, int64_t id,
			   int (*fn)(const struct job_interruption *x, void *ctx), void *ctx)
{
	struct interruption_walk w = {fn, ctx};
	int rc = db_each(db,
			 "SELECT reason, waiting, at_ms, coalesce(requeued_at_ms, 0),"
			 " coalesce(resumed_at_ms, 0) FROM job_interruptions WHERE job_id = ?"
			 " ORDER BY id",
			 "i", interruption_row, &w, id);
	return rc < 0 ? -1 : rc;
}

/* The WHERE of a listing; binds (user, user, status, status, status, name, name). */
#define FILTER                                                                                     \
	" WHERE (? = 0 OR j.user_id = ?) AND (? IS NULL OR j.status = ? OR j.secondary = ?)"       \
	" AND (? IS NULL OR j.name = ?)"

int jobs_list(struct db *db, const struct job_filter *f,
	      int (*fn)(const struct job *j, void *ctx), void *ctx, int64_t *total)
{
	struct job_walk w = {fn, ctx};
	int rc;

	*total = 0;
	if (db_one(db, "SELECT count(*) FROM jobs j" FILTER, "iittttt", row_int64, total,
		   f->user_id, f->user_id, f->status, f->status, f->status, f->name, f->name) < 0)
		return -1;
	rc = db_each(db,
		     "SELECT " JOB_COLUMNS_WITH("NULL") FILTER " ORDER BY j.id DESC LIMIT ? OFFSET ?",
		     "iitttttii", job_row, &w, f->user_id, f->user_id, f->status, f->status,
		     f->status, f->name, f->name, f->limit, f->offset);
	return rc < 0 ? -1 : rc;
}
