/* job_observe.c - metric points, samples, findings and the log reader's
 * place of training jobs; see job_observe.h. */
#include "store/job_observe.h"

#include <string.h>

#include "store/db.h"

int job_metrics_add(struct db *db, int64_t job_id, const char *name, int64_t at_ms, double value)
{
	int rc;

	db_lock(db);
	rc = db_exec(db, "INSERT INTO job_metrics (job_id, name, at_ms, value) VALUES (?, ?, ?, ?)",
		     "itid", job_id, name, at_ms, value);
	db_unlock(db);
	return rc < 0 ? -1 : 0;
}

static int row_count(sqlite3_stmt *st, void *ctx)
{
	*(int64_t *)ctx = sqlite3_column_int64(st, 0);
	return 0;
}

int64_t job_metrics_count(struct db *db, int64_t job_id, const char *name)
{
	int64_t n = 0;

	return db_one(db, "SELECT count(*) FROM job_metrics WHERE job_id = ? AND name = ?", "it",
		      row_count, &n, job_id, name) == 1
		       ? n
		       : -1;
}

struct point_walk {
	job_point_fn fn;
	void *ctx;
};

static int row_point(sqlite3_stmt *st, void *ctx)
{
	struct point_walk *w = ctx;

	return w->fn(w->ctx, (const char *)sqlite3_column_text(st, 0), sqlite3_column_int64(st, 1),
		     sqlite3_column_double(st, 2));
}

int job_metrics_each(struct db *db, int64_t job_id, job_point_fn fn, void *ctx)
{
	struct point_walk w = {fn, ctx};
	int n = db_each(db,
			"SELECT name, at_ms, value FROM job_metrics WHERE job_id = ?"
			" ORDER BY name, at_ms, rowid",
			"i", row_point, &w, job_id);

	return n < 0 ? -1 : n;
}

int job_metrics_last(struct db *db, int64_t job_id, job_point_fn fn, void *ctx)
{
	struct point_walk w = {fn, ctx};
	/* rowids grow with each insert: the greatest of a name is its last point */
	int n = db_each(db,
			"SELECT name, at_ms, value FROM job_metrics WHERE rowid IN"
			" (SELECT max(rowid) FROM job_metrics WHERE job_id = ? GROUP BY name)"
			" ORDER BY name",
			"i", row_point, &w, job_id);

	return n < 0 ? -1 : n;
}

struct series_walk {
	int64_t *at_ms;
	double *value;
	size_t n, max;
};

static int row_series(sqlite3_stmt *st, void *ctx)
{
	struct series_walk *w = ctx;

	if (w->n >= w->max)
		return 1;
	w->at_ms[w->n] = sqlite3_column_int64(st, 0);
	w->value[w->n++] = sqlite3_column_double(st, 1);
	return 0;
}

int job_metrics_series(struct db *db, int64_t job_id, const char *name, int64_t *at_ms,
		       double *value, size_t max)
{
	struct series_walk w = {at_ms, value, 0, max};
	int n = db_each(db,
			"SELECT at_ms, value FROM (SELECT rowid AS r, at_ms, value FROM job_metrics"
			" WHERE job_id = ? AND name = ? ORDER BY rowid DESC LIMIT ?) ORDER BY r",
			"iti", row_series, &w, job_id, name, (int64_t)max);

	return n < 0 ? -1 : (int)w.n;
}

/* A column that may be NULL (unknown): -1 then. */
static double col_double(sqlite3_stmt *st, int col)
{
	return sqlite3_column_type(st, col) == SQLITE_NULL ? -1 : sqlite3_column_double(st, col);
}

static int64_t col_int(sqlite3_stmt *st, int col)
{
	return sqlite3_column_type(st, col) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, col);
}

#define SAMPLE_COLUMNS                                                                             \
	"at_ms, cpu_usage_us, io_wait_us, cpu_percent, io_wait_percent, memory_bytes,"            \
	" memory_limit_bytes, gpu_percent, gpu_memory_bytes, log_bytes"

static void sample_from_row(sqlite3_stmt *st, struct job_sample_row *s)
{
	*s = (struct job_sample_row){
		.at_ms = sqlite3_column_int64(st, 0),
		.cpu_usage_us = sqlite3_column_int64(st, 1),
		.io_wait_us = sqlite3_column_int64(st, 2),
		.cpu_percent = col_double(st, 3),
		.io_wait_percent = col_double(st, 4),
		.memory_bytes = sqlite3_column_int64(st, 5),
		.memory_limit_bytes = sqlite3_column_int64(st, 6),
		.gpu_percent = col_double(st, 7),
		.gpu_memory_bytes = col_int(st, 8),
		.log_bytes = sqlite3_column_int64(st, 9),
	};
}

int job_samples_add(struct db *db, int64_t job_id, const struct job_sample_row *s, int64_t keep)
{
	int rc;

	db_lock(db);
	/* unknown readings are stored as NULL (the API shows null) */
	rc = db_exec(db,
		     "INSERT INTO job_samples (job_id, " SAMPLE_COLUMNS ")"
		     " VALUES (?, ?, ?, ?, nullif(?, -1.0), nullif(?, -1.0), ?, ?,"
		     " nullif(?, -1.0), nullif(?, -1), ?)",
		     "iiiiddiidii", job_id, s->at_ms, s->cpu_usage_us, s->io_wait_us, s->cpu_percent,
		     s->io_wait_percent, s->memory_bytes, s->memory_limit_bytes, s->gpu_percent,
		     s->gpu_memory_bytes, s->log_bytes);
	if (rc >= 0)
		rc = db_exec(db,
			     "DELETE FROM job_samples WHERE job_id = ? AND id <= (SELECT id FROM"
			     " job_samples WHERE job_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
			     "iii", job_id, job_id, keep);
	db_unlock(db);
	return rc < 0 ? -1 : 0;
}

static int row_sample(sqlite3_stmt *st, void *ctx)
{
	sample_from_row(st, ctx);
	return 0;
}

int job_samples_latest(struct db *db, int64_t job_id, struct job_sample_row *out)
{
	int rc = db_one(db,
			"SELECT " SAMPLE_COLUMNS " FROM job_samples WHERE job_id = ?"
			" ORDER BY id DESC LIMIT 1",
			"i", row_sample, out, job_id);

	return rc < 0 ? -1 : rc;
}

struct sample_walk {
	struct job_sample_row *out;
	size_t n, max;
};

static int row_sample_list(sqlite3_stmt *st, void *ctx)
{
	struct sample_walk *w = ctx;

	if (w->n >= w->max)
		return 1;
	sample_from_row(st, &w->out[w->n++]);
	return 0;
}

int job_samples_list(struct db *db, int64_t job_id, struct job_sample_row *out, size_t max)
{
	struct sample_walk w = {out, 0, max};
	int n = db_each(db,
			"SELECT " SAMPLE_COLUMNS " FROM (SELECT * FROM job_samples WHERE job_id = ?"
			" ORDER BY id DESC LIMIT ?) ORDER BY id",
			"ii", row_sample_list, &w, job_id, (int64_t)max);

	return n < 0 ? -1 : (int)w.n;
}

int job_findings_put(struct db *db, int64_t job_id, const char *rule, int64_t at_ms,
		     const char *message, const char *samples_json)
{
	int rc;

	db_lock(db);
	rc = db_exec(db,
		     "INSERT INTO job_findings (job_id, rule, first_at_ms, last_at_ms, message,"
		     " samples) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (job_id, rule) DO UPDATE SET"
		     " last_at_ms = excluded.last_at_ms, message = excluded.message,"
		     " samples = excluded.samples",
		     "itiitt", job_id, rule, at_ms, at_ms, message, samples_json);
	db_unlock(db);
	return rc < 0 ? -1 : 0;
}

struct finding_walk {
	job_finding_fn fn;
	void *ctx;
};

static int row_finding(sqlite3_stmt *st, void *ctx)
{
	struct finding_walk *w = ctx;

	return w->fn(w->ctx, (const char *)sqlite3_column_text(st, 0), sqlite3_column_int64(st, 1),
		     sqlite3_column_int64(st, 2), (const char *)sqlite3_column_text(st, 3),
		     (const char *)sqlite3_column_text(st, 4));
}

int job_findings_each(struct db *db, int64_t job_id, job_finding_fn fn, void *ctx)
{
	struct finding_walk w = {fn, ctx};
	int n = db_each(db,
			"SELECT rule, first_at_ms, last_at_ms, message, samples FROM job_findings"
			" WHERE job_id = ? ORDER BY first_at_ms, rule",
			"i", row_finding, &w, job_id);

	return n < 0 ? -1 : n;
}

static int row_observe(sqlite3_stmt *st, void *ctx)
{
	struct job_observe_row *r = ctx;

	r->log_offset = sqlite3_column_int64(st, 0);
	r->started_at_ms = sqlite3_column_int64(st, 1);
	r->first_output_at_ms = sqlite3_column_int64(st, 2);
	r->last_output_at_ms = sqlite3_column_int64(st, 3);
	r->dropped_defs = (uint64_t)sqlite3_column_int64(st, 4);
	return 0;
}

int job_observe_get(struct db *db, int64_t job_id, struct job_observe_row *out)
{
	memset(out, 0, sizeof(*out));
	int rc = db_one(db,
			"SELECT log_offset, started_at_ms, first_output_at_ms, last_output_at_ms,"
			" dropped_defs FROM job_observe WHERE job_id = ?",
			"i", row_observe, out, job_id);

	return rc < 0 ? -1 : rc;
}

int job_observe_put(struct db *db, int64_t job_id, const struct job_observe_row *r)
{
	int rc;

	db_lock(db);
	rc = db_exec(db,
		     "INSERT OR REPLACE INTO job_observe (job_id, log_offset, started_at_ms,"
		     " first_output_at_ms, last_output_at_ms, dropped_defs) VALUES (?, ?, ?, ?, ?, ?)",
		     "iiiiii", job_id, r->log_offset, r->started_at_ms, r->first_output_at_ms,
		     r->last_output_at_ms, (int64_t)r->dropped_defs);
	db_unlock(db);
	return rc < 0 ? -1 : 0;
}
