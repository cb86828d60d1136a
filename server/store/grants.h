/* grants.h - runtime grants: how a login session on labd's own origin reaches a
 * runtime served on a user origin (<user>.<user_domain>) without its cookie.
 * The UI origin issues a one-time code (single use, short-lived); the user
 * origin redeems it for a runtime cookie valid only on that origin. Only
 * SHA-256 hashes of codes and cookies are stored, and a grant dies with the
 * session that made it (ON DELETE CASCADE: logout, password change, expiry). */
#ifndef LABD_GRANTS_H
#define LABD_GRANTS_H

#include <stdint.h>

#include "store/sessions.h"

struct db;

#define GRANT_SECRET_LEN 43 /* base64url of 32 bytes, for codes and cookies */

/* Issues a code for session_id to reach target_user_id's origin, valid ttl_s
 * seconds; writes it into code[]. Also forgets expired unredeemed codes.
 * Returns 0 or -1. */
int grants_issue(struct db *db, int64_t session_id, int64_t target_user_id, int64_t now,
		 int64_t ttl_s, char code[GRANT_SECRET_LEN + 1]);
/* Redeems a code on target_user_id's origin: at most once, before it expires,
 * only for the user it was issued for. Writes a fresh cookie secret into
 * cookie[] and the session's user into *viewer_id; older grants of the same
 * session and target end. Returns 1 redeemed, 0 refused, -1 error. */
int grants_redeem(struct db *db, const char *code, int64_t target_user_id, int64_t now,
		  char cookie[GRANT_SECRET_LEN + 1], int64_t *viewer_id);
/* Resolves a runtime cookie on target_user_id's origin while its session
 * lives (and records the session's use, as sessions_lookup does): 1 with
 * *viewer_id and *session_id, 0 unknown/ended/another origin's, -1 error. */
int grants_lookup(struct db *db, const char *cookie, int64_t target_user_id,
		  const struct session_limits *lim, int64_t now, int64_t *viewer_id,
		  int64_t *session_id);

#endif
