/* sessions.h - browser login sessions. The cookie holds 256 random bits; the
 * store keeps only their SHA-256, so a copy of the database logs nobody in. */
#ifndef LABD_SESSIONS_H
#define LABD_SESSIONS_H

#include <stdbool.h>
#include <stdint.h>

struct db;

#define SESSION_COOKIE_NAME "labd_session"
#define SESSION_SECRET_LEN 43 /* base64url of 32 bytes */
#define SESSION_CSRF_LEN 43

struct session {
	int64_t id;
	int64_t user_id;
	char csrf_token[SESSION_CSRF_LEN + 1];
	int64_t last_seen, expires_at; /* as stored after this lookup */
};

struct session_limits {
	int64_t idle_s;     /* without use before the session ends */
	int64_t lifetime_s; /* after login before the session ends */
};

/* True when value has the shape of a session secret (43 base64url chars). */
bool sessions_secret_valid(const char *value);
/* Creates a session; writes the secret for the cookie into secret[] and fills *out. */
int sessions_create(struct db *db, int64_t user_id, const char *address,
		    const struct session_limits *lim, int64_t now,
		    char secret[SESSION_SECRET_LEN + 1], struct session *out);
/* Finds the live session for a cookie secret and records its use; expired ones
 * are deleted. Returns 1 found, 0 not found/expired, -1 on error. */
int sessions_lookup(struct db *db, const char *secret, const struct session_limits *lim,
		    int64_t now, struct session *out);
/* Ends a session. This and every other store function that ends sessions or
 * tokens or changes a user bumps db_generation(DB_IDENTITIES). */
int sessions_delete(struct db *db, int64_t session_id);
/* When a session was created (its login): 1 with *created_at, 0 none, -1 error. */
int sessions_created_at(struct db *db, int64_t session_id, int64_t *created_at);
/* Removes every expired session; returns how many, or -1. */
int sessions_purge_expired(struct db *db, const struct session_limits *lim, int64_t now);

#endif
