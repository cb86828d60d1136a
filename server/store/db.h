/* db.h - the SQLite store: opening with WAL, busy timeout and foreign keys,
 * numbered migrations embedded in the binary, bound-parameter helpers and the
 * one row walker (db_each/db_one) every table module reads rows through.
 *
 * One connection is shared by the HTTP worker threads; every store function
 * (users_*, sessions_*, ...) holds db_lock() for its whole statement group so
 * transactions never interleave. */
#ifndef LABD_DB_H
#define LABD_DB_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

struct db;

#define DB_CONFLICT (-2) /* a UNIQUE/PRIMARY KEY constraint refused the change */

/* Opens (creating) the database at path and applies pending migrations.
 * On success *out is owned by the caller: release with db_close(). */
int db_open(const char *path, struct db **out);
void db_close(struct db *db);

/* The newest schema version embedded in this binary, and the file's version. */
int db_latest_version(void);
int db_schema_version(struct db *db);

void db_lock(struct db *db);
void db_unlock(struct db *db);

/* Binding types: 'i' int64_t, 't' const char * (NULL binds NULL), 'n' NULL,
 * 'd' double.
 * db_prepare: a statement with its parameters bound; the caller steps it and
 * gives it back with db_done(). Statements are compiled once per SQL text
 * (sql must be a string literal: its address is the cache key) and reused.
 * Caller holds db_lock. Returns 0 or -1. */
int db_prepare(struct db *db, sqlite3_stmt **out, const char *sql, const char *types, ...);
/* Returns a statement from db_prepare (reset for reuse, or finalized). */
void db_done(struct db *db, sqlite3_stmt *st);
/* Runs one statement to completion. Returns the number of changed rows, -1 on
 * error, DB_CONFLICT on a uniqueness violation. Caller holds db_lock. */
int db_exec(struct db *db, const char *sql, const char *types, ...);
/* A row callback: reads the current row's columns (text pointers are valid
 * only during the call) into ctx; returns 0 to go on, non-zero to stop. */
typedef int db_row_fn(sqlite3_stmt *st, void *ctx);
/* Runs a query, binding the values like db_prepare, and calls row for each
 * result row in order until it returns non-zero. Holds db_lock for the whole
 * walk; the lock is recursive, so a caller inside a transaction and a row
 * callback that uses the store again both work. Returns the number of rows
 * passed to row, or -EIO (logged) when the query could not be prepared or
 * stepped. sql must be a string literal, as for db_prepare. */
int db_each(struct db *db, const char *sql, const char *types, db_row_fn *row, void *ctx, ...);
/* db_each for the first row only: 1 found (row was called), 0 none, -EIO. */
int db_one(struct db *db, const char *sql, const char *types, db_row_fn *row, void *ctx, ...);
/* A db_row_fn storing column 0 as an int into *(int *)ctx. */
int db_row_int(sqlite3_stmt *st, void *ctx);
/* Last inserted rowid on this connection. Caller holds db_lock. */
int64_t db_last_id(struct db *db);

/* Change generations, for in-memory caches of store reads (auth's identity
 * cache, the gate's runtime cache). A cache entry is valid only while the
 * generation it was read under is current; readers take the generation before
 * they read the store. */
enum db_topic {
	DB_IDENTITIES, /* sessions ended, tokens revoked, users changed or deleted */
	DB_RUNTIMES,   /* runtimes created or changing state */
	DB_TOPICS
};
uint64_t db_generation(struct db *db, enum db_topic topic);
/* Bumps a topic's generation; store functions call it after the change, still
 * holding db_lock. */
void db_changed(struct db *db, enum db_topic topic);
/* Notices commits by another process (the host CLI: labd user ...) since the
 * last call and bumps every generation for them. Returns 1 when there were,
 * 0 when not, -1 on error. Takes db_lock itself. */
int db_poll_external(struct db *db);

/* BEGIN IMMEDIATE / COMMIT / ROLLBACK; caller holds db_lock. A COMMIT that
 * fails (a full disk) rolls the transaction back before it returns -1, so the
 * shared connection never keeps a half-done transaction open. */
int db_begin(struct db *db);
int db_commit(struct db *db);
void db_rollback(struct db *db);

/* A full state disk (docs/operations.md, "A full state disk"). SQLite itself
 * fails cleanly there (SQLITE_FULL: the statement or transaction is undone,
 * the file stays whole); these let the layers above say so and refuse a
 * change before it starts instead of half-way through it. */
/* What a change needs free on the state disk before it starts: a request's
 * rows, its audit entry and their WAL frames take a few pages; the rest is
 * for the writers that cannot wait (heartbeats, ends of runtimes and jobs). */
#define DB_ROOM_BYTES (1ULL << 20)
/* Whether the store is full: a write failed for want of space (SQLITE_FULL,
 * or ENOSPC/EDQUOT under an I/O error) or db_room found too little, and no
 * write or db_room has succeeded since. Lock-free. */
bool db_full(struct db *db);
/* How many times db_full has become true since db_open: a caller that must
 * catch up on what a full spell kept out compares it with the count it saw. */
uint64_t db_full_spells(struct db *db);
/* 0 when the database's file system has at least DB_ROOM_BYTES free for an
 * unprivileged writer (or cannot be asked: the write decides), -ENOSPC
 * otherwise; updates db_full either way. One statvfs, no lock. */
int db_room(struct db *db);

#endif
