/* db.c - SQLite connection, pragmas, migrations and binding helpers; see db.h. */
#include "store/db.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "labd/fault.h"
#include "labd/log.h"
#include "store/migrations.h"

/* Prepared statements kept for reuse: parsing SQL was the largest cost of a
 * proxied request. Keyed by the SQL literal's address. */
#define STMT_CACHE 48

struct cached_stmt {
	const char *sql;
	sqlite3_stmt *st;
	bool busy; /* handed out; a nested use of the same SQL gets its own */
};

struct db {
	sqlite3 *conn;
	pthread_mutex_t lock;
	struct cached_stmt cache[STMT_CACHE];
	_Atomic uint64_t generation[DB_TOPICS];
	int64_t data_version; /* PRAGMA data_version at the last db_poll_external */
	_Atomic bool full;    /* a write failed for want of space; none succeeded since */
	_Atomic uint64_t full_spells; /* times full became true */
	char dir[4096];       /* the database's directory, for db_room's statvfs */
};

void db_lock(struct db *db) { pthread_mutex_lock(&db->lock); }
void db_unlock(struct db *db) { pthread_mutex_unlock(&db->lock); }
int64_t db_last_id(struct db *db) { return sqlite3_last_insert_rowid(db->conn); }
int db_latest_version(void) { return migrations_count(); }

uint64_t db_generation(struct db *db, enum db_topic topic)
{
	return atomic_load(&db->generation[topic]);
}

void db_changed(struct db *db, enum db_topic topic)
{
	atomic_fetch_add(&db->generation[topic], 1);
}

bool db_full(struct db *db) { return atomic_load(&db->full); }
uint64_t db_full_spells(struct db *db) { return atomic_load(&db->full_spells); }

/* Marks the store full; true when it was not (a new spell: worth a log line). */
static bool mark_full(struct db *db)
{
	if (atomic_exchange(&db->full, true))
		return false;
	atomic_fetch_add(&db->full_spells, 1);
	return true;
}

/* A failed step or exec: SQLITE_FULL, or an I/O error whose errno is ENOSPC
 * or EDQUOT (a write of the WAL, its index or a checkpoint), marks the store
 * full. The spell's first failure is an error; each later one a warning
 * naming its statement, so a write that is lost is never lost unsaid. */
static void note_failure(struct db *db, const char *what, const char *sql)
{
	int code = sqlite3_extended_errcode(db->conn);
	int sys = sqlite3_system_errno(db->conn);
	bool full = (code & 0xff) == SQLITE_FULL ||
		    ((code & 0xff) == SQLITE_IOERR && (sys == ENOSPC || sys == EDQUOT));

	if (!full)
		log_error("sqlite %s: %s: %s", what, sql, sqlite3_errmsg(db->conn));
	else if (mark_full(db))
		log_error("state disk full: sqlite %s: %s: %s; changes are refused until space "
			  "returns",
			  what, sql, sqlite3_errmsg(db->conn));
	else
		log_warn("state disk full: sqlite %s: %.80s: %s", what, sql,
			 sqlite3_errmsg(db->conn));
}

/* A write went through: the disk has room again. */
static void note_written(struct db *db)
{
	if (atomic_load(&db->full) && atomic_exchange(&db->full, false))
		log_info("state disk: writes succeed again");
}

int db_room(struct db *db)
{
	struct statvfs vfs;

	/* f_bavail: what an unprivileged writer (labd-web) may still take */
	if (statvfs(db->dir, &vfs) < 0)
		return 0; /* cannot tell: let the write itself decide */
	if ((uint64_t)vfs.f_bavail * vfs.f_frsize >= DB_ROOM_BYTES) {
		note_written(db);
		return 0;
	}
	if (mark_full(db))
		log_error("state disk full: %llu bytes left in %s, below %llu; writes are refused "
			  "until space returns",
			  (unsigned long long)vfs.f_bavail * vfs.f_frsize, db->dir,
			  (unsigned long long)DB_ROOM_BYTES);
	return -ENOSPC;
}

/* PRAGMA data_version changes when another connection commits, never for
 * this connection's own writes (those bump their topic themselves). */
static int64_t data_version(struct db *db)
{
	sqlite3_stmt *st;
	int64_t v = -1;

	if (db_prepare(db, &st, "PRAGMA data_version", "") < 0)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	db_done(db, st);
	return v;
}

int db_poll_external(struct db *db)
{
	int rc = 0;

	db_lock(db);
	int64_t v = data_version(db);
	if (v < 0) {
		rc = -1;
	} else if (v != db->data_version) {
		db->data_version = v;
		for (int t = 0; t < DB_TOPICS; t++)
			db_changed(db, (enum db_topic)t);
		rc = 1;
	}
	db_unlock(db);
	return rc;
}

static int db_simple(struct db *db, const char *sql)
{
	if (sqlite3_exec(db->conn, sql, NULL, NULL, NULL) != SQLITE_OK) {
		note_failure(db, "exec", sql);
		return -1;
	}
	return 0;
}

int db_begin(struct db *db) { return db_simple(db, "BEGIN IMMEDIATE"); }

int db_commit(struct db *db)
{
	if (db_simple(db, "COMMIT") < 0) {
		/* A COMMIT that failed (SQLITE_FULL) may leave the transaction
		 * open: end it, so the next BEGIN on this shared connection does
		 * not fail, and nothing of it is half-kept. */
		db_rollback(db);
		return -1;
	}
	note_written(db);
	return 0;
}

void db_rollback(struct db *db)
{
	if (!sqlite3_get_autocommit(db->conn))
		db_simple(db, "ROLLBACK");
}

int db_schema_version(struct db *db)
{
	int v;
	return db_one(db, "PRAGMA user_version", "", db_row_int, &v) == 1 ? v : -1;
}

static int bind_args(sqlite3_stmt *st, const char *types, va_list ap)
{
	for (int i = 0; types[i]; i++) {
		int rc = SQLITE_MISUSE;
		if (types[i] == 'i') {
			rc = sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t));
		} else if (types[i] == 't') {
			const char *s = va_arg(ap, const char *);
			rc = s ? sqlite3_bind_text(st, i + 1, s, -1, SQLITE_TRANSIENT)
			       : sqlite3_bind_null(st, i + 1);
		} else if (types[i] == 'n') {
			rc = sqlite3_bind_null(st, i + 1);
		} else if (types[i] == 'd') {
			rc = sqlite3_bind_double(st, i + 1, va_arg(ap, double));
		}
		if (rc != SQLITE_OK)
			return -1;
	}
	return 0;
}

/* A cached statement for sql, compiling it on first use; NULL when the cache
 * cannot help (full, or this SQL is already in use further up the stack). */
static sqlite3_stmt *cached(struct db *db, const char *sql)
{
	struct cached_stmt *free_slot = NULL;

	for (int i = 0; i < STMT_CACHE; i++) {
		struct cached_stmt *c = &db->cache[i];
		if (c->sql == sql) {
			if (c->busy)
				return NULL;
			c->busy = true;
			return c->st;
		}
		if (!c->sql && !free_slot)
			free_slot = c;
	}
	if (!free_slot || sqlite3_prepare_v3(db->conn, sql, -1, SQLITE_PREPARE_PERSISTENT,
					      &free_slot->st, NULL) != SQLITE_OK)
		return NULL;
	free_slot->sql = sql;
	free_slot->busy = true;
	return free_slot->st;
}

void db_done(struct db *db, sqlite3_stmt *st)
{
	for (int i = 0; i < STMT_CACHE; i++) {
		if (db->cache[i].st == st && db->cache[i].busy) {
			sqlite3_reset(st);
			sqlite3_clear_bindings(st);
			db->cache[i].busy = false;
			return;
		}
	}
	sqlite3_finalize(st);
}

static int prepare_va(struct db *db, sqlite3_stmt **out, const char *sql, const char *types,
		      va_list ap)
{
	*out = cached(db, sql);
	if (!*out && sqlite3_prepare_v2(db->conn, sql, -1, out, NULL) != SQLITE_OK) {
		log_error("sqlite prepare: %s: %s", sql, sqlite3_errmsg(db->conn));
		return -1;
	}
	if (bind_args(*out, types, ap) < 0) {
		log_error("sqlite bind: %s: %s", sql, sqlite3_errmsg(db->conn));
		db_done(db, *out);
		*out = NULL;
		return -1;
	}
	return 0;
}

int db_prepare(struct db *db, sqlite3_stmt **out, const char *sql, const char *types, ...)
{
	va_list ap;
	va_start(ap, types);
	int rc = prepare_va(db, out, sql, types, ap);
	va_end(ap);
	return rc;
}

int db_exec(struct db *db, const char *sql, const char *types, ...)
{
	sqlite3_stmt *st;
	va_list ap;
	int rc;

	va_start(ap, types);
	rc = prepare_va(db, &st, sql, types, ap);
	va_end(ap);
	if (rc < 0)
		return -1;
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE || rc == SQLITE_ROW) {
		rc = sqlite3_changes(db->conn);
		if (!sqlite3_stmt_readonly(st) && sqlite3_get_autocommit(db->conn))
			note_written(db); /* committed on its own */
	} else if (sqlite3_extended_errcode(db->conn) == SQLITE_CONSTRAINT_UNIQUE ||
		   sqlite3_extended_errcode(db->conn) == SQLITE_CONSTRAINT_PRIMARYKEY) {
		rc = DB_CONFLICT;
	} else {
		note_failure(db, "step", sql);
		rc = -1;
	}
	db_done(db, st);
	return rc;
}

int db_row_int(sqlite3_stmt *st, void *ctx)
{
	*(int *)ctx = sqlite3_column_int(st, 0);
	return 0;
}

/* The walk behind db_each and db_one; max_rows 0 = no limit. */
static int each_va(struct db *db, const char *sql, const char *types, db_row_fn *row, void *ctx,
		   int max_rows, va_list ap)
{
	sqlite3_stmt *st;
	int rc, rows = 0;

	db_lock(db);
	if (prepare_va(db, &st, sql, types, ap) < 0) {
		rows = -EIO; /* prepare_va has logged why */
		goto out;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		rows++;
		if (row(st, ctx) || rows == max_rows)
			break;
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		note_failure(db, "step", sql);
		rows = -EIO;
	}
	db_done(db, st);
out:
	db_unlock(db);
	return rows;
}

int db_each(struct db *db, const char *sql, const char *types, db_row_fn *row, void *ctx, ...)
{
	va_list ap;
	va_start(ap, ctx);
	int rc = each_va(db, sql, types, row, ctx, 0, ap);
	va_end(ap);
	return rc;
}

int db_one(struct db *db, const char *sql, const char *types, db_row_fn *row, void *ctx, ...)
{
	va_list ap;
	va_start(ap, ctx);
	int rc = each_va(db, sql, types, row, ctx, 1, ap);
	va_end(ap);
	return rc;
}

/* Applies each migration newer than the file's user_version in its own
 * transaction, so a crash mid-way leaves the schema at a whole version. */
static int db_migrate(struct db *db)
{
	int current = db_schema_version(db);
	char pragma[64];

	if (current < 0)
		return -1;
	if (current > migrations_count())
		return log_error("database schema version %d is newer than this labd (%d)",
				 current, migrations_count());
	/* Foreign keys off while migrating (a no-op inside a transaction, so
	 * here): rebuilding a table means dropping the old one, which would
	 * otherwise cascade to every row that references it. Each migration
	 * checks them itself before it commits. */
	if (current < migrations_count() && db_simple(db, "PRAGMA foreign_keys = OFF") < 0)
		return -1;
	for (int v = current + 1; v <= migrations_count(); v++) {
		snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d", v);
		if (db_begin(db) < 0)
			return -1;
		if (db_simple(db, migrations_sql(v)) < 0 || db_simple(db, pragma) < 0 ||
		    db_one(db, "PRAGMA foreign_key_check", "", db_row_int, &(int){0}) != 0) {
			db_rollback(db);
			return log_error("database migration %d failed", v);
		}
		FAULT_POINT_NTH("migration.commit", v); /* its statements ran, uncommitted */
		if (db_commit(db) < 0)
			return -1;
		log_info("database migrated to schema version %d", v);
	}
	return 0;
}

/* path's directory ("." for a bare name) into out. */
static void dir_of(const char *path, char *out, size_t len)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(out, len, ".");
	else if (slash == path)
		snprintf(out, len, "/");
	else
		snprintf(out, len, "%.*s", (int)(slash - path), path);
}

int db_open(const char *path, struct db **out)
{
	struct db *db = calloc(1, sizeof(*db));
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;

	if (!db)
		return log_errno("db: calloc");
	/* Recursive: a callback of an *_each() walk may use the store too. */
	pthread_mutexattr_t attr;
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&db->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	dir_of(path, db->dir, sizeof(db->dir));
	if (sqlite3_open_v2(path, &db->conn, flags, NULL) != SQLITE_OK) {
		log_error("open database %s: %s", path,
			  db->conn ? sqlite3_errmsg(db->conn) : "out of memory");
		db_close(db);
		return -1;
	}
	sqlite3_busy_timeout(db->conn, 5000);
	sqlite3_extended_result_codes(db->conn, 1);
	/* WAL lets the host CLI (labd user ...) write while the daemon runs;
	 * synchronous=NORMAL is durable across process crashes in WAL mode. */
	if (db_simple(db, "PRAGMA journal_mode = WAL") < 0 ||
	    db_simple(db, "PRAGMA synchronous = NORMAL") < 0 ||
	    db_migrate(db) < 0 || db_simple(db, "PRAGMA foreign_keys = ON") < 0) {
		db_close(db);
		return -1;
	}
	db->data_version = data_version(db);
	*out = db;
	return 0;
}

void db_close(struct db *db)
{
	if (!db)
		return;
	for (int i = 0; i < STMT_CACHE; i++)
		sqlite3_finalize(db->cache[i].st);
	sqlite3_close(db->conn);
	pthread_mutex_destroy(&db->lock);
	free(db);
}
