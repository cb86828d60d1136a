/* gpu_queue.c - the GPU queue's rows; see gpu_queue.h. */
#include "store/gpu_queue.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store/db.h"

/* The place an entry has until the queue's next pass computes the real one
 * (moments later): the end of the queue, never 0, so that no reader in
 * between sees a place that does not exist. */
#define PROVISIONAL_PLACE "(SELECT count(*) + 1 FROM gpu_queue)"

int gpu_queue_add(struct db *db, int64_t user_id, const char *token, const char *gpu_kind,
		  int64_t now, int64_t length_s, int64_t expires_at, struct runtime *out)
{
	int rc;
	int64_t id = 0;

	db_lock(db);
	if (db_begin(db) < 0) {
		db_unlock(db);
		return -EIO;
	}
	rc = db_exec(db,
		     "INSERT INTO runtimes (user_id, kind, state, token, gpus, created_at, deadline,"
		     " last_activity, gpu_kind) VALUES (?, 'gpu', 'queued', ?, '', ?, ?, ?, ?)",
		     "itiiit", user_id, token, now, now + length_s, now, gpu_kind);
	if (rc == 1) {
		id = db_last_id(db);
		rc = db_exec(db, "INSERT INTO gpu_queue (runtime_id, queued_at, expires_at, position)"
				 " VALUES (?, ?, ?, " PROVISIONAL_PLACE ")", "iii", id, now, expires_at);
	}
	if (rc != 1)
		db_rollback(db);
	else if (db_commit(db) < 0)
		rc = -1;
	db_changed(db, DB_RUNTIMES);
	db_unlock(db);
	if (rc != 1)
		return rc == DB_CONFLICT ? DB_CONFLICT : -EIO;
	return runtimes_live(db, user_id, out) == 1 ? 0 : -EIO;
}

struct entry_walk {
	int (*fn)(const struct gpu_queue_entry *e, void *ctx);
	void *ctx;
};

static int entry_from_row(sqlite3_stmt *st, void *arg)
{
	struct entry_walk *w = arg;
	struct gpu_queue_entry e = {
		.runtime_id = sqlite3_column_int64(st, 0),
		.user_id = sqlite3_column_int64(st, 1),
		.queued_at = sqlite3_column_int64(st, 3),
		.expires_at = sqlite3_column_int64(st, 4),
		.length_s = sqlite3_column_int64(st, 5),
		.position = sqlite3_column_int(st, 6),
		.estimate_at = sqlite3_column_int64(st, 7),
	};

	snprintf(e.user_name, sizeof(e.user_name), "%s", (const char *)sqlite3_column_text(st, 2));
	snprintf(e.gpu_kind, sizeof(e.gpu_kind), "%s", (const char *)sqlite3_column_text(st, 8));
	return w->fn(&e, w->ctx);
}

int gpu_queue_each(struct db *db, int (*fn)(const struct gpu_queue_entry *e, void *ctx),
		   void *ctx)
{
	struct entry_walk w = {fn, ctx};
	int rc = db_each(db,
			 "SELECT q.runtime_id, r.user_id, u.name, q.queued_at, q.expires_at,"
			 " r.deadline - r.created_at, q.position, q.estimate_at, r.gpu_kind"
			 " FROM gpu_queue q JOIN runtimes r ON r.id = q.runtime_id"
			 " JOIN users u ON u.id = r.user_id WHERE r.state = 'queued'"
			 " ORDER BY q.queued_at, q.runtime_id",
			 "", entry_from_row, &w);
	return rc < 0 ? -EIO : rc;
}

int gpu_queue_set_place(struct db *db, int64_t runtime_id, int position, int64_t estimate_at)
{
	db_lock(db);
	int rc = db_exec(db,
			 "UPDATE gpu_queue SET position = ?, estimate_at = ? WHERE runtime_id = ?"
			 " AND (position != ? OR estimate_at != ?)",
			 "iiiii", (int64_t)position, estimate_at, runtime_id, (int64_t)position,
			 estimate_at);
	if (rc > 0)
		db_changed(db, DB_RUNTIMES); /* the gate's cache holds rows with their place */
	db_unlock(db);
	return rc < 0 ? -EIO : rc > 0;
}

/* One UPDATE of the row and one statement on its entry, both or neither. */
static int move_row(struct db *db, int moved, int entry_rc)
{
	if (moved < 0 || entry_rc < 0) {
		db_rollback(db);
		return -EIO;
	}
	return db_commit(db) < 0 ? -EIO : moved > 0;
}

int gpu_queue_take(struct db *db, int64_t runtime_id, const char *gpus, unsigned fraction_milli,
		   int64_t now, int64_t deadline)
{
	int moved, rc = 0;

	db_lock(db);
	if (db_begin(db) < 0) {
		db_unlock(db);
		return -EIO;
	}
	moved = db_exec(db,
			"UPDATE runtimes SET state = 'starting', gpus = ?, gpu_fraction_milli = ?,"
			" created_at = ?, deadline = ?, last_activity = ? WHERE id = ?"
			" AND state = 'queued'",
			"tiiiii", gpus, (int64_t)fraction_milli, now, deadline, now, runtime_id);
	if (moved > 0)
		rc = db_exec(db, "DELETE FROM gpu_queue WHERE runtime_id = ?", "i", runtime_id);
	rc = move_row(db, moved, rc);
	db_changed(db, DB_RUNTIMES);
	db_unlock(db);
	return rc;
}

int gpu_queue_put_back(struct db *db, int64_t runtime_id, int64_t queued_at, int64_t expires_at)
{
	int moved, rc = 0;

	db_lock(db);
	if (db_begin(db) < 0) {
		db_unlock(db);
		return -EIO;
	}
	moved = db_exec(db,
			"UPDATE runtimes SET state = 'queued', gpus = '' WHERE id = ?"
			" AND state = 'starting'",
			"i", runtime_id);
	if (moved > 0)
		rc = db_exec(db, "INSERT OR REPLACE INTO gpu_queue (runtime_id, queued_at, expires_at,"
				 " position) VALUES (?, ?, ?, " PROVISIONAL_PLACE ")",
			     "iii", runtime_id, queued_at, expires_at);
	rc = move_row(db, moved, rc);
	db_changed(db, DB_RUNTIMES);
	db_unlock(db);
	return rc;
}
