/* job_storage.c - what each job keeps and which ended jobs go; see
 * job_storage.h. */
#include "store/job_storage.h"

#include <stdlib.h>
#include <string.h>

#include "store/db.h"

static int row_use(sqlite3_stmt *st, void *ctx)
{
	struct job_storage_use *u = ctx;

	u->jobs = sqlite3_column_int64(st, 0);
	u->spec_bytes = sqlite3_column_int64(st, 1);
	u->log_bytes = sqlite3_column_int64(st, 2);
	u->metric_bytes = sqlite3_column_int64(st, 3);
	u->total_bytes = u->spec_bytes + u->log_bytes + u->metric_bytes;
	return 0;
}

int job_storage_of_user(struct db *db, int64_t user_id, struct job_storage_use *out)
{
	memset(out, 0, sizeof(*out));
	/* one indexed range of small rows, however big the specs are */
	return db_one(db,
		      "SELECT count(*), coalesce(sum(spec_bytes), 0), coalesce(sum(log_bytes), 0),"
		      " coalesce(sum(metric_bytes), 0) FROM job_storage WHERE user_id = ?",
		      "i", row_use, out, user_id) == 1
		       ? 0
		       : -1;
}

struct open_walk {
	int (*fn)(const struct job_storage_open *o, void *ctx);
	void *ctx;
};

static int row_open(sqlite3_stmt *st, void *arg)
{
	struct open_walk *w = arg;
	struct job_storage_open o = {.job_id = sqlite3_column_int64(st, 0),
				     .user_id = sqlite3_column_int64(st, 1),
				     .ended_at = sqlite3_column_int64(st, 2)};
	return w->fn(&o, w->ctx);
}

int job_storage_each_open(struct db *db, int64_t user_id, int max,
			  int (*fn)(const struct job_storage_open *o, void *ctx), void *ctx)
{
	struct open_walk w = {fn, ctx};
	int n = db_each(db,
			"SELECT job_id, user_id, ended_at FROM job_storage"
			" WHERE final = 0 AND (? = 0 OR user_id = ?) ORDER BY job_id LIMIT ?",
			"iii", row_open, &w, user_id, user_id, (int64_t)max);
	return n < 0 ? -1 : n;
}

int64_t job_storage_metric_estimate(int64_t points, int64_t name_bytes)
{
	return points * 48 + name_bytes * 9 / 4;
}

static int row_points(sqlite3_stmt *st, void *ctx)
{
	int64_t *v = ctx;

	v[0] = sqlite3_column_int64(st, 0);
	v[1] = sqlite3_column_int64(st, 1);
	return 0;
}

int64_t job_storage_metric_bytes(struct db *db, int64_t job_id)
{
	int64_t v[2] = {0, 0};

	/* read from the index job_metrics_job alone (it holds the name) */
	if (db_one(db,
		   "SELECT count(*), coalesce(sum(length(CAST(name AS BLOB))), 0) FROM job_metrics"
		   " WHERE job_id = ?",
		   "i", row_points, v, job_id) != 1)
		return -1;
	return job_storage_metric_estimate(v[0], v[1]);
}

int job_storage_set(struct db *db, int64_t job_id, int64_t log_bytes, int64_t metric_bytes,
		    bool final)
{
	db_lock(db);
	int rc = db_exec(db,
			 "UPDATE job_storage SET log_bytes = ?, metric_bytes = ?, final = ?"
			 " WHERE job_id = ?",
			 "iiii", log_bytes, metric_bytes, (int64_t)final, job_id);
	db_unlock(db);
	return rc < 0 ? -1 : 0;
}

struct id_walk {
	int (*fn)(int64_t job_id, void *ctx);
	void *ctx;
};

static int row_id(sqlite3_stmt *st, void *arg)
{
	struct id_walk *w = arg;

	return w->fn(sqlite3_column_int64(st, 0), w->ctx);
}

/* The users a call looks at for the cap: at most this many (a lab's users). */
#define CAP_USERS_MAX 100000

struct users {
	int64_t *ids;
	size_t n, size;
};

static int row_user(sqlite3_stmt *st, void *arg)
{
	struct users *u = arg;

	if (u->n == u->size) {
		size_t size = u->size ? u->size * 2 : 64;
		int64_t *ids = size <= CAP_USERS_MAX ? realloc(u->ids, size * sizeof(*ids)) : NULL;
		if (!ids)
			return 1; /* the rest wait for a later call */
		u->ids = ids;
		u->size = size;
	}
	u->ids[u->n++] = sqlite3_column_int64(st, 0);
	return 0;
}

int job_storage_each_expired(struct db *db, int64_t ended_before, int64_t keep_per_user,
			     int64_t ended_since, int max, int (*fn)(int64_t job_id, void *ctx),
			     void *ctx)
{
	struct id_walk w = {fn, ctx};
	struct users users = {NULL, 0, 0};
	int n = 0, got = 0;

	/* by age: a range of the index on ended_at */
	if (ended_before > 0 &&
	    (n = db_each(db,
			 "SELECT job_id FROM job_storage WHERE ended_at > 0 AND ended_at < ?"
			 " ORDER BY ended_at, job_id LIMIT ?",
			 "ii", row_id, &w, ended_before, (int64_t)max)) < 0)
		return -1;
	if (keep_per_user < 0 || n >= max)
		return n;
	/* by count: a user goes over it only when a job of theirs ends, so the
	 * users with an end since ended_since; then each one's ended jobs past
	 * their newest keep_per_user (a range of the index on user_id that
	 * stops at keep_per_user + max entries); those ended before
	 * ended_before were all passed above */
	if (db_each(db,
		    "SELECT DISTINCT user_id FROM job_storage INDEXED BY job_storage_ended"
		    " WHERE ended_at >= ?",
		    "i", row_user, &users, ended_since > 0 ? ended_since : 1) < 0)
		got = -1;
	for (size_t i = 0; got >= 0 && i < users.n && n < max; i++) {
		got = db_each(db,
			      "SELECT job_id FROM job_storage WHERE user_id = ? AND ended_at > 0"
			      " AND ended_at >= ? ORDER BY ended_at DESC, job_id DESC LIMIT ? OFFSET ?",
			      "iiii", row_id, &w, users.ids[i], ended_before, (int64_t)(max - n),
			      keep_per_user);
		n += got > 0 ? got : 0;
	}
	free(users.ids);
	return got < 0 ? -1 : n;
}

int job_storage_delete_job(struct db *db, int64_t job_id)
{
	int rc;

	db_lock(db);
	rc = db_exec(db,
		     "DELETE FROM jobs WHERE id = ? AND status NOT IN ('InProgress', 'Stopping')",
		     "i", job_id);
	if (rc == 0 && job_storage_job_exists(db, job_id) == 1)
		rc = JOB_STORAGE_LIVE;
	db_unlock(db);
	return rc < 0 && rc != JOB_STORAGE_LIVE ? -1 : rc;
}

int job_storage_job_exists(struct db *db, int64_t job_id)
{
	int n = 0;

	if (db_one(db, "SELECT count(*) FROM jobs WHERE id = ?", "i", db_row_int, &n, job_id) != 1)
		return -1;
	return n > 0;
}
