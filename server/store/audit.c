/* audit.c - audit rows; see audit.h. */
#include "store/audit.h"

#include <errno.h>
#include <stdint.h>

#include "store/db.h"

int audit_add(struct db *db, int64_t now, const char *actor, const char *action,
	      const char *target, const char *address, const char *detail)
{
	db_lock(db);
	int rc = db_exec(db,
			 "INSERT INTO audit (time, actor, action, target, address, detail)"
			 " VALUES (?, ?, ?, ?, ?, ?)",
			 "ittttt", now, actor, action, target, address, detail);
	db_unlock(db);
	return rc == 1 ? 0 : -EIO; /* db_exec has logged why */
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
