/* handoff.h - from labd's origin to a user origin without labd's cookie.
 *
 * labd's session cookie lives on the UI origin only. To open a runtime, the UI
 * origin issues a one-time code bound to the login session and the target
 * user (store/grants.h: single use, HANDOFF_CODE_TTL_S, stored hashed) and
 * redirects the browser to <user origin>/_labd/handoff?code=...; the user
 * origin redeems it for its own cookie, RUNTIME_COOKIE_NAME (host-only,
 * HttpOnly, SameSite=Lax; "__Host-" prefixed behind TLS, auth_cookie_name),
 * accepted only on that origin and only while the session lives. */
#ifndef LABD_HANDOFF_H
#define LABD_HANDOFF_H

#include "store/users.h"

struct http_request;

#define RUNTIME_COOKIE_NAME "labd_rt"
#define HANDOFF_PATH "/_labd/handoff"
#define HANDOFF_CODE_TTL_S 30

/* On the UI origin, for a cookie-authenticated request already allowed to
 * reach target's runtime: issues a code and redirects to target's origin,
 * coming back to next (a local path under /user/<target>/). Sets the reply. */
void handoff_start(struct http_request *req, const struct user *target, const char *next);
/* GET HANDOFF_PATH on the origin of user: redeems ?code=, sets the runtime
 * cookie, audits an admin's access to another user's runtime, and redirects
 * to ?next= when it lies under /user/<user>/. Sets the reply. */
void handoff_finish(struct http_request *req, const char *user);
/* Resolves the credentials of a request on the origin of user into
 * http_identity(req): a bearer token (AUTH_TOKEN) or the runtime cookie
 * (AUTH_RUNTIME); labd's session cookie counts for nothing here. Returns -1
 * only on a store error. */
int handoff_identify(struct http_request *req, const char *user);

#endif
