/* pools.c - job sandbox rows; see pools.h. */
#include "store/pools.h"

#include <stdio.h>
#include <string.h>

#include "store/db.h"
#include "store/ledger.h"

static const char *const state_names[] = {"starting", "available", "in_use", "ended"};

const char *pools_state_name(enum pool_state s) { return state_names[s]; }

#define POOL_COLUMNS                                                                               \
	"p.id, p.user_id, u.name, p.state, p.gpu, p.gpus, p.gpu_count, p.image, p.memory_bytes,"   \
	" p.cpus_milli, p.network, p.ready, p.created_at, p.deadline, p.available_until,"          \
	" p.ended_at, p.job_id, p.last_job_id, p.end_reason, p.gpu_kind"                           \
	" FROM pools p JOIN users u ON u.id = p.user_id"

static void copy_text(char *dst, size_t len, sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	snprintf(dst, len, "%s", t ? (const char *)t : "");
}

static int pool_from_row(sqlite3_stmt *st, void *out)
{
	struct pool *p = out;
	int c = 0;

	memset(p, 0, sizeof(*p));
	p->id = sqlite3_column_int64(st, c++);
	p->user_id = sqlite3_column_int64(st, c++);
	copy_text(p->user_name, sizeof(p->user_name), st, c++);
	const char *state = (const char *)sqlite3_column_text(st, c++);
	for (int i = 0; i < 4; i++)
		if (state && strcmp(state, state_names[i]) == 0)
			p->state = (enum pool_state)i;
	p->gpu = sqlite3_column_int(st, c++) != 0;
	copy_text(p->gpus, sizeof(p->gpus), st, c++);
	p->gpu_count = sqlite3_column_int(st, c++);
	copy_text(p->image, sizeof(p->image), st, c++);
	p->memory_bytes = sqlite3_column_int64(st, c++);
	p->cpus_milli = sqlite3_column_int64(st, c++);
	p->network = sqlite3_column_int(st, c++) != 0;
	p->ready = sqlite3_column_int(st, c++) != 0;
	p->created_at = sqlite3_column_int64(st, c++);
	p->deadline = sqlite3_column_int64(st, c++);
	p->available_until = sqlite3_column_int64(st, c++);
	p->ended_at = sqlite3_column_int64(st, c++);
	p->job_id = sqlite3_column_int64(st, c++);
	p->last_job_id = sqlite3_column_int64(st, c++);
	copy_text(p->end_reason, sizeof(p->end_reason), st, c++);
	copy_text(p->gpu_kind, sizeof(p->gpu_kind), st, c++);
	return 0;
}

static const char *gpu_kind_of(const struct pool_shape *shape)
{
	return shape->gpu_kind && shape->gpu_kind[0] ? shape->gpu_kind : "whole";
}

int pools_create(struct db *db, const struct pool_shape *shape, const char *gpus, int64_t job_id,
		 int64_t now, int64_t deadline, struct pool *out)
{
	int64_t id;

	db_lock(db);
	int rc = db_exec(db,
			 "INSERT INTO pools (user_id, state, gpu, gpus, gpu_count, image, memory_bytes,"
			 " cpus_milli, network, created_at, deadline, job_id, gpu_kind,"
			 " gpu_fraction_milli)"
			 " VALUES (?, 'starting', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			 "iititiiiiiiti", shape->user_id, (int64_t)shape->gpu, gpus,
			 (int64_t)shape->gpu_count, shape->size.image ? shape->size.image : "",
			 shape->size.memory_bytes, shape->size.cpus_milli, (int64_t)shape->size.network,
			 now, deadline, job_id, gpu_kind_of(shape),
			 (int64_t)(shape->gpu_fraction_milli ? shape->gpu_fraction_milli : 1000));
	id = db_last_id(db);
	db_unlock(db);
	if (rc != 1)
		return -1;
	return pools_find(db, id, out) == 1 ? 0 : -1;
}

int pools_find(struct db *db, int64_t id, struct pool *out)
{
	int rc = db_one(db, "SELECT " POOL_COLUMNS " WHERE p.id = ?", "i", pool_from_row, out, id);
	return rc < 0 ? -1 : rc;
}

int pools_find_available(struct db *db, const struct pool_shape *shape, int64_t not_before,
			 int64_t now, struct pool *out)
{
	int rc = db_one(db,
			"SELECT " POOL_COLUMNS " WHERE p.state = 'available' AND p.user_id = ?"
			" AND p.gpu = ? AND p.gpu_count = ? AND p.image = ? AND p.memory_bytes = ?"
			" AND p.cpus_milli = ? AND p.network = ? AND p.deadline > ?"
			" AND p.available_until > ? AND p.gpu_kind = ?"
			" ORDER BY p.available_until, p.id LIMIT 1",
			"iiitiiiiit", pool_from_row, out, shape->user_id, (int64_t)shape->gpu,
			(int64_t)shape->gpu_count, shape->size.image ? shape->size.image : "",
			shape->size.memory_bytes, shape->size.cpus_milli, (int64_t)shape->size.network,
			not_before, now, gpu_kind_of(shape));
	return rc < 0 ? -1 : rc;
}

int pools_count_live(struct db *db, int64_t user_id)
{
	int n = 0;

	if (db_one(db, "SELECT count(*) FROM pools WHERE user_id = ? AND state <> 'ended'", "i",
		   db_row_int, &n, user_id) != 1)
		return -1;
	return n;
}

int pools_set_ready(struct db *db, int64_t id)
{
	db_lock(db);
	int rc = db_exec(db,
			 "UPDATE pools SET ready = 1, state = CASE state WHEN 'starting' THEN 'in_use'"
			 " ELSE state END WHERE id = ? AND state IN ('starting', 'in_use') AND ready = 0",
			 "i", id);
	db_unlock(db);
	return rc < 0 ? -1 : rc > 0;
}

/* One state change and its warm ledger entry, in a transaction. */
static int change(struct db *db, int64_t id, const char *sql, const char *types, int64_t a,
		  int64_t b, const char *text, bool open_warm, bool close_warm, int64_t now)
{
	int rc;

	db_lock(db);
	if (db_begin(db) < 0) {
		db_unlock(db);
		return -1;
	}
	if (text)
		rc = db_exec(db, sql, types, a, text, id);
	else
		rc = db_exec(db, sql, types, a, b, id);
	if (rc > 0 && close_warm &&
	    ledger_close_source(db, "warm", id, now, text ? text : "reused") < 0)
		rc = -1;
	if (rc > 0 && open_warm && ledger_open_warm(db, id, now) < 0)
		rc = -1;
	if (rc < 0) {
		db_rollback(db);
	} else if (db_commit(db) < 0) {
		rc = -1;
	}
	db_unlock(db);
	return rc < 0 ? -1 : rc > 0;
}

int pools_take(struct db *db, int64_t id, int64_t job_id, int64_t now)
{
	return change(db, id,
		      "UPDATE pools SET state = 'in_use', job_id = ?, available_until = 0"
		      " WHERE state = 'available' AND ? >= 0 AND id = ?",
		      "iii", job_id, 0, NULL, false, true, now);
}

int pools_release(struct db *db, int64_t id, int64_t until, int64_t now, bool warm)
{
	return change(db, id,
		      "UPDATE pools SET state = 'available', last_job_id = job_id, job_id = 0,"
		      " available_until = ? WHERE state = 'in_use' AND ? >= 0 AND id = ?",
		      "iii", until, 0, NULL, warm, false, now);
}

int pools_end(struct db *db, int64_t id, const char *reason, int64_t now)
{
	return change(db, id,
		      "UPDATE pools SET state = 'ended', ended_at = ?, end_reason = ?,"
		      " last_job_id = CASE WHEN job_id > 0 THEN job_id ELSE last_job_id END,"
		      " job_id = 0 WHERE state <> 'ended' AND id = ?",
		      "iti", now, 0, reason, false, true, now);
}

struct pool_walk {
	int (*fn)(const struct pool *p, void *ctx);
	void *ctx;
};

static int pool_row(sqlite3_stmt *st, void *arg)
{
	struct pool_walk *w = arg;
	struct pool p;

	pool_from_row(st, &p);
	return w->fn(&p, w->ctx);
}

int pools_each_live(struct db *db, int (*fn)(const struct pool *p, void *ctx), void *ctx)
{
	struct pool_walk w = {fn, ctx};
	return db_each(db, "SELECT " POOL_COLUMNS " WHERE p.state <> 'ended' ORDER BY p.id", "",
		       pool_row, &w) < 0
		       ? -1
		       : 0;
}

int pools_each_warm(struct db *db, int64_t user_id, int (*fn)(const struct pool *p, void *ctx),
		    void *ctx)
{
	struct pool_walk w = {fn, ctx};
	return db_each(db,
		       "SELECT " POOL_COLUMNS " WHERE p.state IN ('available', 'in_use')"
		       " AND (? = 0 OR p.user_id = ?) ORDER BY p.id DESC",
		       "ii", pool_row, &w, user_id, user_id) < 0
		       ? -1
		       : 0;
}

static int row_int64(sqlite3_stmt *st, void *ctx)
{
	*(int64_t *)ctx = sqlite3_column_int64(st, 0);
	return 0;
}

int64_t pools_warm_s(struct db *db, int64_t id, int64_t now)
{
	int64_t total = 0;

	db_one(db,
	       "SELECT coalesce(sum(CASE WHEN end_at IS NULL THEN max(0, ? - start_at)"
	       " ELSE billable_s END), 0) FROM ledger WHERE pool_id = ? AND source = 'warm'",
	       "ii", row_int64, &total, now, id);
	return total;
}
