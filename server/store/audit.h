/* audit.h - the append-only audit log: logins, failures, lockouts, user and
 * token changes. Entries name actors and targets by user name, so they outlive
 * deleted accounts. */
#ifndef LABD_AUDIT_H
#define LABD_AUDIT_H

#include <stdint.h>

struct db;

struct audit_entry {
	int64_t id;
	int64_t time;
	const char *actor, *action, *target, *address, *detail; /* borrowed; NULL = none */
};

/* Appends an entry: 0, or -EIO when it was not recorded. A lost entry is not
 * fatal to the change it describes, but the caller logs it as an error.
 * On a full state disk (db_full) the entry is held in memory, logged in full,
 * and written in order before any newer one once there is room (the next
 * audit_add or audit_flush): 0 then too. -EIO only past AUDIT_HELD_MAX held
 * entries (1,024), each such entry logged in full. */
int audit_add(struct db *db, int64_t now, const char *actor, const char *action,
	      const char *target, const char *address, const char *detail);
/* Writes held entries (a periodic caller: the reconciler's pass). The number
 * still held; cheap (one atomic load) when none are. */
int audit_flush(struct db *db);
/* Which entries audit_each walks; a NULL string or 0 bound does not filter. */
struct audit_filter {
	int64_t before;            /* id < before */
	const char *action;        /* exact action, e.g. "user.create" */
	const char *action_prefix; /* action starting with this, e.g. "runtime." */
	const char *actor;         /* exact actor name */
	int64_t from_s, to_s;      /* from_s <= time < to_s (unix seconds) */
};

/* Calls fn for up to limit entries matching f, newest first. Entry strings are
 * valid only during the call. 0, or -1 when the query failed (logged). */
int audit_each(struct db *db, const struct audit_filter *f, int limit,
	       int (*fn)(const struct audit_entry *e, void *ctx), void *ctx);

#endif
