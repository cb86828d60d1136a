/* runtimes.c - runtime rows; see runtimes.h. */
#include "store/runtimes.h"

#include <stdio.h>
#include <string.h>

#include "labd/fault.h"
#include "store/db.h"
#include "store/ledger.h"

static const char *const kind_names[] = {"cpu", "gpu"};
static const char *const state_names[RUNTIME_STATES] = {"starting", "running", "stopping",
							 "stopped",  "failed",  "queued"};

const char *runtimes_kind_name(enum runtime_kind k) { return kind_names[k]; }
const char *runtimes_state_name(enum runtime_state s) { return state_names[s]; }

bool runtimes_state_live(enum runtime_state s)
{
	return s == RUNTIME_QUEUED || s == RUNTIME_STARTING || s == RUNTIME_RUNNING ||
	       s == RUNTIME_STOPPING;
}

int runtimes_kind_parse(const char *text, enum runtime_kind *out)
{
	for (int i = 0; i < 2; i++) {
		if (strcmp(text, kind_names[i]) == 0) {
			*out = (enum runtime_kind)i;
			return 0;
		}
	}
	return -1;
}

#define RUNTIME_COLUMNS                                                                            \
	"r.id, r.user_id, u.name, r.kind, r.state, coalesce(r.reason, ''), r.token, r.gpus,"      \
	" r.created_at, coalesce(r.ready_at, 0), r.deadline, coalesce(r.ended_at, 0),"           \
	" r.last_activity, r.endpoint, coalesce(q.queued_at, 0), coalesce(q.expires_at, 0),"      \
	" coalesce(q.estimate_at, 0), coalesce(q.position, 0), r.image, r.image_hash,"  \
	" r.gpu_kind"                                                                              \
	" FROM runtimes r JOIN users u ON u.id = r.user_id"                                       \
	" LEFT JOIN gpu_queue q ON q.runtime_id = r.id"
#define LIVE "r.state IN ('queued', 'starting', 'running', 'stopping')"

static void copy_text(char *dst, size_t len, sqlite3_stmt *st, int col)
{
	snprintf(dst, len, "%s", (const char *)sqlite3_column_text(st, col));
}

/* A db_row_fn filling the struct runtime at out. */
static int runtime_from_row(sqlite3_stmt *st, void *out)
{
	struct runtime *r = out;

	memset(r, 0, sizeof(*r));
	r->id = sqlite3_column_int64(st, 0);
	r->user_id = sqlite3_column_int64(st, 1);
	copy_text(r->user_name, sizeof(r->user_name), st, 2);
	r->kind = strcmp((const char *)sqlite3_column_text(st, 3), "gpu") == 0 ? RUNTIME_GPU
										: RUNTIME_CPU;
	for (int i = 0; i < RUNTIME_STATES; i++)
		if (strcmp((const char *)sqlite3_column_text(st, 4), state_names[i]) == 0)
			r->state = (enum runtime_state)i;
	copy_text(r->reason, sizeof(r->reason), st, 5);
	copy_text(r->token, sizeof(r->token), st, 6);
	copy_text(r->gpus, sizeof(r->gpus), st, 7);
	r->created_at = sqlite3_column_int64(st, 8);
	r->ready_at = sqlite3_column_int64(st, 9);
	r->deadline = sqlite3_column_int64(st, 10);
	r->ended_at = sqlite3_column_int64(st, 11);
	r->last_activity = sqlite3_column_int64(st, 12);
	copy_text(r->endpoint, sizeof(r->endpoint), st, 13);
	r->queued_at = sqlite3_column_int64(st, 14);
	r->queue_expires_at = sqlite3_column_int64(st, 15);
	r->queue_estimate_at = sqlite3_column_int64(st, 16);
	r->queue_position = sqlite3_column_int(st, 17);
	copy_text(r->image, sizeof(r->image), st, 18);
	copy_text(r->image_hash, sizeof(r->image_hash), st, 19);
	copy_text(r->gpu_kind, sizeof(r->gpu_kind), st, 20);
	return 0;
}

int runtimes_create(struct db *db, int64_t user_id, enum runtime_kind kind, const char *token,
		    const char *gpus, int64_t now, int64_t deadline, struct runtime *out)
{
	int rc;
	int64_t id;

	db_lock(db);
	rc = db_exec(db,
		     "INSERT INTO runtimes (user_id, kind, state, token, gpus, created_at, deadline,"
		     " last_activity) VALUES (?, ?, 'starting', ?, ?, ?, ?, ?)",
		     "itttiii", user_id, kind_names[kind], token, gpus, now, deadline, now);
	id = db_last_id(db);
	db_changed(db, DB_RUNTIMES);
	db_unlock(db);
	if (rc != 1)
		return rc == DB_CONFLICT ? DB_CONFLICT : -1;
	return db_one(db, "SELECT " RUNTIME_COLUMNS " WHERE r.id = ?", "i", runtime_from_row, out,
		      id) == 1
		       ? 0
		       : -1;
}

int runtimes_live(struct db *db, int64_t user_id, struct runtime *out)
{
	int rc = db_one(db, "SELECT " RUNTIME_COLUMNS " WHERE r.user_id = ? AND " LIVE, "i",
			runtime_from_row, out, user_id);
	return rc < 0 ? -1 : rc;
}

int runtimes_latest(struct db *db, int64_t user_id, struct runtime *out)
{
	int rc = db_one(db,
			"SELECT " RUNTIME_COLUMNS " WHERE r.user_id = ? ORDER BY r.id DESC LIMIT 1",
			"i", runtime_from_row, out, user_id);
	return rc < 0 ? -1 : rc;
}

int runtimes_find(struct db *db, int64_t id, struct runtime *out)
{
	int rc = db_one(db, "SELECT " RUNTIME_COLUMNS " WHERE r.id = ?", "i", runtime_from_row, out,
			id);
	return rc < 0 ? -1 : rc;
}

int runtimes_live_by_name(struct db *db, const char *name, struct runtime *out)
{
	int rc = db_one(db, "SELECT " RUNTIME_COLUMNS " WHERE u.name = ? AND " LIVE, "t",
			runtime_from_row, out, name);
	return rc < 0 ? -1 : rc;
}

/* The ledger moves with the runtime, in its transaction: running opens the
 * entry, an ending state closes it; a ledger write that fails undoes the
 * state change, so the caller sees -1 and nothing is billed wrongly. */
static int move_ledger(struct db *db, int64_t id, enum runtime_state state, int64_t now)
{
	/* a row leaving the GPU queue leaves no entry behind (store/gpu_queue.h) */
	if (state != RUNTIME_QUEUED &&
	    db_exec(db, "DELETE FROM gpu_queue WHERE runtime_id = ?", "i", id) < 0)
		return -1;
	if (state == RUNTIME_RUNNING)
		return ledger_open_runtime(db, id, now);
	if (!runtimes_state_live(state))
		return ledger_close_runtime(db, id, now);
	return 0;
}

int runtimes_set_state(struct db *db, int64_t id, enum runtime_state state, const char *reason,
		       int64_t now)
{
	int rc;
	bool ending = !runtimes_state_live(state);

	db_lock(db);
	if (db_begin(db) < 0) {
		db_unlock(db);
		return -1;
	}
	rc = db_exec(db,
		     "UPDATE runtimes SET state = ?, reason = coalesce(?, reason),"
		     " ready_at = CASE WHEN ? = 'running' THEN ? ELSE ready_at END,"
		     " ended_at = CASE WHEN ? THEN ? ELSE ended_at END"
		     " WHERE id = ? AND state IN ('queued', 'starting', 'running', 'stopping')",
		     "tttiiii", state_names[state], reason, state_names[state], now, (int64_t)ending,
		     now, id);
	if (rc < 0 || (rc > 0 && move_ledger(db, id, state, now) < 0)) {
		db_rollback(db);
		rc = -1;
	} else if (db_commit(db) < 0) {
		rc = -1;
	}
	FAULT_POINT_STEP("runtime.state.committed", state_names[state]);
	db_changed(db, DB_RUNTIMES);
	db_unlock(db);
	return rc < 0 ? -1 : rc > 0;
}

int runtimes_set_endpoint(struct db *db, int64_t id, const char *endpoint)
{
	db_lock(db);
	int rc = db_exec(db, "UPDATE runtimes SET endpoint = ? WHERE id = ?", "ti", endpoint, id);
	db_changed(db, DB_RUNTIMES); /* the gate's cache holds the endpoint */
	db_unlock(db);
	return rc < 0 ? -1 : 0;
}

int runtimes_set_image(struct db *db, int64_t id, const char *image, const char *image_hash)
{
	db_lock(db);
	int rc = db_exec(db, "UPDATE runtimes SET image = ?, image_hash = ? WHERE id = ?", "tti",
			 image, image_hash, id);
	db_unlock(db);
	return rc < 0 ? -1 : 0;
}

int runtimes_touch(struct db *db, int64_t id, int64_t now)
{
	db_lock(db);
	int rc = db_exec(db,
			 "UPDATE runtimes SET last_activity = ? WHERE id = ? AND last_activity <= ?",
			 "iii", now, id, now - RUNTIME_TOUCH_INTERVAL_S);
	db_unlock(db);
	return rc < 0 ? -1 : 0;
}

struct runtime_walk {
	int (*fn)(const struct runtime *r, void *ctx);
	void *ctx;
};

static int runtime_row(sqlite3_stmt *st, void *arg)
{
	struct runtime_walk *w = arg;
	struct runtime r;

	runtime_from_row(st, &r);
	return w->fn(&r, w->ctx);
}

/* fn may use the store (runtimes_set_state, ...): the walk holds the recursive lock. */
int runtimes_each_live(struct db *db, int (*fn)(const struct runtime *r, void *ctx), void *ctx)
{
	struct runtime_walk w = {fn, ctx};
	int rc = db_each(db, "SELECT " RUNTIME_COLUMNS " WHERE " LIVE " ORDER BY r.id", "",
			 runtime_row, &w);
	return rc < 0 ? -1 : 0;
}
