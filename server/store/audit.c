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

int audit_each(struct db *db, int64_t before, int limit,
	       int (*fn)(const struct audit_entry *e, void *ctx), void *ctx)
{
	sqlite3_stmt *st;
	struct audit_entry e;
	int rc;

	db_lock(db);
	if (db_prepare(db, &st,
		       "SELECT id, time, actor, action, target, address, detail FROM audit"
		       " WHERE id < ? ORDER BY id DESC LIMIT ?",
		       "ii", before > 0 ? before : INT64_MAX, (int64_t)limit) < 0) {
		db_unlock(db);
		return -1;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		e.id = sqlite3_column_int64(st, 0);
		e.time = sqlite3_column_int64(st, 1);
		e.actor = (const char *)sqlite3_column_text(st, 2);
		e.action = (const char *)sqlite3_column_text(st, 3);
		e.target = (const char *)sqlite3_column_text(st, 4);
		e.address = (const char *)sqlite3_column_text(st, 5);
		e.detail = (const char *)sqlite3_column_text(st, 6);
		if (fn(&e, ctx))
			break;
	}
	db_done(db, st);
	db_unlock(db);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}
