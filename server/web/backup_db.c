/* backup_db.c - the store's copy and the few reads the backup CLI makes; see
 * backup_int.h.
 *
 * SQLite's online backup API copies every page inside one read transaction: in
 * WAL mode that never blocks the web process's writers, and the copy is the
 * store as of one commit. Root opens the store read-only; where that makes SQLite
 * create the -wal or -shm file (labd stopped), SQLite gives it the database file's
 * owner (its unix VFS does so when it runs as root), so the web process can still
 * open its store: test_backup.py checks it. */
#include "web/backup_int.h"

#include <sqlite3.h>
#include <stdio.h>
#include <unistd.h>

#include "labd/log.h"

#define BUSY_WAIT_MS 10000

static sqlite3 *open_db(const char *path, int flags)
{
	sqlite3 *db = NULL;

	if (sqlite3_open_v2(path, &db, flags | SQLITE_OPEN_NOFOLLOW, NULL) != SQLITE_OK) {
		log_error("open %s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
		sqlite3_close(db);
		return NULL;
	}
	sqlite3_busy_timeout(db, BUSY_WAIT_MS);
	return db;
}

static int read_int(sqlite3 *db, const char *sql, const char *text, long long *out)
{
	sqlite3_stmt *st = NULL;
	int rc = -1;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		log_error("%s: %s", sql, sqlite3_errmsg(db));
		return -1;
	}
	if (text)
		sqlite3_bind_text(st, 1, text, -1, SQLITE_STATIC);
	switch (sqlite3_step(st)) {
	case SQLITE_ROW:
		*out = sqlite3_column_int64(st, 0);
		rc = 1;
		break;
	case SQLITE_DONE:
		rc = 0;
		break;
	default:
		log_error("%s: %s", sql, sqlite3_errmsg(db));
	}
	sqlite3_finalize(st);
	return rc;
}

/* The copy: one step of every page, then made a single self-contained file
 * (the source's WAL mode is in the header the copy took). */
static int copy_pages(sqlite3 *src, sqlite3 *dst)
{
	sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
	int rc;

	if (!b)
		return log_error("backup of the store: %s", sqlite3_errmsg(dst));
	rc = sqlite3_backup_step(b, -1);
	sqlite3_backup_finish(b);
	if (rc != SQLITE_DONE)
		return log_error("backup of the store: %s", sqlite3_errstr(rc));
	if (sqlite3_exec(dst, "PRAGMA journal_mode = DELETE", NULL, NULL, NULL) != SQLITE_OK)
		return log_error("backup of the store: %s", sqlite3_errmsg(dst));
	return 0;
}

int backup_db_copy(const char *src_path, const char *dst_path, int *schema)
{
	sqlite3 *src = open_db(src_path, SQLITE_OPEN_READONLY), *dst = NULL;
	long long v = -1;
	int rc = -1;

	if (!src)
		goto out;
	if (!(dst = open_db(dst_path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)))
		goto out;
	if (copy_pages(src, dst) < 0 || read_int(dst, "PRAGMA user_version", NULL, &v) != 1)
		goto out;
	*schema = (int)v;
	rc = 0;
out:
	sqlite3_close(dst);
	sqlite3_close(src);
	if (rc < 0)
		unlink(dst_path);
	return rc;
}

int backup_db_schema(const char *path)
{
	sqlite3 *db = open_db(path, SQLITE_OPEN_READONLY);
	long long v = -1;

	if (db && read_int(db, "PRAGMA user_version", NULL, &v) != 1)
		v = -1;
	sqlite3_close(db);
	return (int)v;
}

int backup_db_user_id(const char *path, const char *name, long long *id)
{
	sqlite3 *db = open_db(path, SQLITE_OPEN_READONLY);
	int rc = db ? read_int(db, "SELECT id FROM users WHERE name = ?1", name, id) : -1;

	sqlite3_close(db);
	return rc;
}
