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
 * fatal to the change it describes, but the caller logs it as an error. */
int audit_add(struct db *db, int64_t now, const char *actor, const char *action,
	      const char *target, const char *address, const char *detail);
/* Calls fn for up to limit entries newest first, with id < before (0 = no bound).
 * Entry strings are valid only during the call. */
int audit_each(struct db *db, int64_t before, int limit,
	       int (*fn)(const struct audit_entry *e, void *ctx), void *ctx);

#endif
