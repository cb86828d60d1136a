/* audit.c - audit rows; see audit.h. */
#include "store/audit.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "labd/log.h"
#include "store/db.h"

/* Entries a full disk kept out, oldest first. Always written before a newer
 * one, so the table keeps the order things happened in. One store per
 * process has them (the web process's); the lock is that store's. */
#define AUDIT_HELD_MAX 1024
#define FIELDS 5 /* actor, action, target, address, detail */

struct held_entry {
	int64_t time;
	char *field[FIELDS]; /* owned; NULL = none */
};

static struct {
	struct db *db;
	_Atomic int n; /* read without the lock by audit_flush's fast path */
	struct held_entry e[AUDIT_HELD_MAX];
} held;

static int insert(struct db *db, int64_t now, const char *const f[FIELDS])
{
	int rc = db_exec(db,
			 "INSERT INTO audit (time, actor, action, target, address, detail)"
			 " VALUES (?, ?, ?, ?, ?, ?)",
			 "ittttt", now, f[0], f[1], f[2], f[3], f[4]);
	return rc == 1 ? 0 : -EIO; /* db_exec has logged why */
}

static const char *or_dash(const char *s) { return s ? s : "-"; }

/* The whole entry goes to the daemon's log as it is held or lost: should the
 * process end before the disk has room again, the log still has it. */
static void log_entry(const char *what, int64_t now, const char *const f[FIELDS])
{
	log_error("audit: state disk full: entry %s: time=%lld actor=%s action=%s target=%s "
		  "address=%s detail=%s",
		  what, (long long)now, or_dash(f[0]), or_dash(f[1]), or_dash(f[2]),
		  or_dash(f[3]), or_dash(f[4]));
}

static void held_free(struct held_entry *e)
{
	for (int i = 0; i < FIELDS; i++)
		free(e->field[i]);
}

/* Keeps an entry for a later write; 0, or -EIO when it could not be (logged). */
static int hold(struct db *db, int64_t now, const char *const f[FIELDS])
{
	int n = atomic_load(&held.n);
	struct held_entry *e = &held.e[n];

	if ((n > 0 && held.db != db) || n == AUDIT_HELD_MAX) {
		log_entry("lost (too many held)", now, f);
		return -EIO;
	}
	memset(e, 0, sizeof(*e));
	e->time = now;
	for (int i = 0; i < FIELDS; i++) {
		if (f[i] && !(e->field[i] = strdup(f[i]))) {
			held_free(e);
			log_entry("lost (out of memory)", now, f);
			return -EIO;
		}
	}
	held.db = db;
	atomic_store(&held.n, n + 1);
	log_entry("held in memory until it can be written", now, f);
	return 0;
}

/* Writes held entries in order until one fails. Caller holds db_lock. */
static void write_held(struct db *db)
{
	int n = atomic_load(&held.n), done = 0;

	if (n == 0 || held.db != db)
		return;
	while (done < n && insert(db, held.e[done].time,
				  (const char *const *)held.e[done].field) == 0)
		held_free(&held.e[done++]);
	if (done == 0)
		return;
	memmove(held.e, held.e + done, (size_t)(n - done) * sizeof(held.e[0]));
	atomic_store(&held.n, n - done);
	log_info("audit: %d held entries written, %d still held", done, n - done);
}

int audit_add(struct db *db, int64_t now, const char *actor, const char *action,
	      const char *target, const char *address, const char *detail)
{
	const char *const f[FIELDS] = {actor, action, target, address, detail};
	int rc;

	db_lock(db);
	write_held(db);
	/* behind held entries when there are any: the order stays the order of time */
	rc = atomic_load(&held.n) > 0 && held.db == db ? -ENOSPC : insert(db, now, f);
	if (rc < 0 && (rc == -ENOSPC || db_full(db)))
		rc = hold(db, now, f);
	db_unlock(db);
	return rc;
}

int audit_flush(struct db *db)
{
	int left;

	if (atomic_load(&held.n) == 0)
		return 0;
	db_lock(db);
	write_held(db);
	left = held.db == db ? atomic_load(&held.n) : 0;
	db_unlock(db);
	return left;
}

struct audit_walk {
	int (*fn)(const struct audit_entry *e, void *ctx);
	void *ctx;
};

static int audit_row(sqlite3_stmt *st, void *arg)
{
	struct audit_walk *w = arg;
	struct audit_entry e = {
		.id = sqlite3_column_int64(st, 0),
		.time = sqlite3_column_int64(st, 1),
		.actor = (const char *)sqlite3_column_text(st, 2),
		.action = (const char *)sqlite3_column_text(st, 3),
		.target = (const char *)sqlite3_column_text(st, 4),
		.address = (const char *)sqlite3_column_text(st, 5),
		.detail = (const char *)sqlite3_column_text(st, 6),
	};
	return w->fn(&e, w->ctx);
}

int audit_each(struct db *db, const struct audit_filter *f, int limit,
	       int (*fn)(const struct audit_entry *e, void *ctx), void *ctx)
{
	struct audit_walk w = {fn, ctx};
	/* One fixed statement: a NULL parameter switches its condition off, so
	 * the SQL stays a literal and every value is bound, never spliced in.
	 * The prefix is matched with substr(), not LIKE, so '_' and '%' in it
	 * mean themselves. */
	int rc = db_each(db,
			 "SELECT id, time, actor, action, target, address, detail FROM audit"
			 " WHERE id < ?1"
			 " AND (?2 IS NULL OR action = ?2)"
			 " AND (?3 IS NULL OR substr(action, 1, length(?3)) = ?3)"
			 " AND (?4 IS NULL OR actor = ?4)"
			 " AND time >= ?5 AND time < ?6"
			 " ORDER BY id DESC LIMIT ?7",
			 "itttiii", audit_row, &w, f->before > 0 ? f->before : INT64_MAX,
			 f->action, f->action_prefix, f->actor, f->from_s,
			 f->to_s > 0 ? f->to_s : INT64_MAX, (int64_t)limit);
	return rc < 0 ? -1 : 0;
}
