/* scope.h - what an API token may do: named scopes (JupyterHub's RBAC scopes
 * are the model), the set each role holds, and their text form. A request's
 * effective scopes are its token's, cut down to what the owner's role holds
 * now; a cookie session holds every scope of its role. */
#ifndef LABD_SCOPE_H
#define LABD_SCOPE_H

#include <stdbool.h>
#include <stddef.h>

#include "store/users.h"

/* One bit each; the route table names the one a route needs. */
enum scope {
	SCOPE_IDENTIFY = 1u << 0,       /* who am I (GET /api/v1/me); every token has it */
	SCOPE_ACCOUNT = 1u << 1,        /* change the own password */
	SCOPE_TOKENS = 1u << 2,         /* list, create and revoke the own tokens */
	SCOPE_RUNTIMES = 1u << 3,       /* the own runtime: start, stop, read, use */
	SCOPE_READ_USAGE = 1u << 4,     /* the own usage */
	SCOPE_READ_QUOTA = 1u << 5,     /* the own quota */
	SCOPE_READ_GPUS = 1u << 6,      /* the GPU pool and queue */
	SCOPE_ADMIN_USERS = 1u << 7,    /* users: list, create, change, delete */
	SCOPE_ADMIN_QUOTA = 1u << 8,    /* plans, groups, user quotas */
	SCOPE_ADMIN_USAGE = 1u << 9,    /* everyone's usage */
	SCOPE_ADMIN_RUNTIMES = 1u << 10, /* every live runtime, and stopping them */
	SCOPE_ADMIN_AUDIT = 1u << 11,   /* the audit log */
	SCOPE_METRICS = 1u << 12,       /* GET /metrics */
	SCOPE_JOBS = 1u << 13,          /* the own training jobs and warm pools (runs code) */
	/* with jobs: every user's jobs (their environment included) and warm pools */
	SCOPE_ADMIN_JOBS = 1u << 14,
};

#define SCOPE_TEXT_MAX 256 /* every name, space-separated, fits */

/* Every scope a role holds (a user: the first seven and jobs; an admin: all). */
unsigned scope_of_role(enum user_role role);
/* The name of one scope bit ("read:usage"), or NULL for none or several. */
const char *scope_name(unsigned bit);
/* The bit of a scope name, or 0 when there is no such scope. */
unsigned scope_parse(const char *name);
/* Parses the stored form (names separated by spaces; "*" = every scope of the
 * owner's role at use time). Unknown names are dropped, so a scope removed
 * from a later release grants nothing. */
unsigned scope_parse_list(const char *text, enum user_role role);
/* Writes the names of the bits in set, space-separated, into out. */
void scope_format(unsigned set, char *out, size_t len);
/* Calls fn with each scope's bit and name, in table order. */
void scope_each(void (*fn)(unsigned bit, const char *name, void *ctx), void *ctx);

#endif
