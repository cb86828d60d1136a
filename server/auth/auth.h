/* auth.h - who is making a request (session cookie or bearer token), CSRF and
 * Origin checks, and the login procedure with throttling and auditing. */
#ifndef LABD_AUTH_H
#define LABD_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/identity.h"
#include "store/sessions.h"
#include "store/users.h"

struct app;
struct http_request;


/* Resolves the request's credentials into http_identity(req) (AUTH_NONE when absent,
 * expired, revoked or the user is disabled). Returns -1 only on a store error.
 * What the store said is kept in app->identities (when set) for a few
 * seconds, keyed by the secret's SHA-256, and forgotten at once by any store
 * change to sessions, tokens or users (db_generation(DB_IDENTITIES)). */
int auth_identify(struct http_request *req);
/* For state-changing methods with cookie auth: true when the request carries the
 * session's CSRF token (header X-CSRF-Token or form field csrf_token). */
bool auth_csrf_ok(struct http_request *req);
/* False when an Origin header names a different origin than the Host header. */
bool auth_origin_ok(struct http_request *req);

enum login_result { LOGIN_OK, LOGIN_INVALID, LOGIN_THROTTLED, LOGIN_BUSY, LOGIN_ERROR };

/* Checks name/password under throttling (login.c: a progressive delay per
 * user name and per client address, never a lockout), audits the outcome and
 * on success creates a session: fills *user, *session and secret (for the
 * cookie). *retry_after is set for THROTTLED (the delay left) and BUSY (every
 * hashing slot taken: answer 503). */
enum login_result auth_login(struct app *app, const char *name, const char *password,
			     const char *address, struct user *user, struct session *session,
			     char secret[SESSION_SECRET_LEN + 1], int64_t *retry_after);
/* Checks a signed-in user's password again (a password change) under the same
 * throttling as a login: a wrong one counts as a failed login, audited as
 * action (e.g. "password.failure"). Returns LOGIN_OK when it matches. */
enum login_result auth_check_password(struct app *app, const struct user *user,
				      const char *password, const char *address,
				      const char *action, int64_t *retry_after);

/* The name of a cookie labd sets (SESSION_COOKIE_NAME, RUNTIME_COOKIE_NAME):
 * behind TLS ([server] secure_cookies) it carries the "__Host-" prefix, which
 * browsers accept only with Secure, Path=/ and no Domain, so no other origin
 * (another user's, on a shared parent domain) can set or shadow it; over plain
 * HTTP (the demo) the browser would refuse such a cookie, so the bare name is
 * used. Only this name is read: a cookie of the other name is ignored. */
const char *auth_cookie_name(const struct app *app, const char *base);
/* Writes the Set-Cookie value for a session secret (or, with NULL, one that
 * clears the cookie). */
void auth_cookie_header(const struct app *app, const char *secret, char *out, size_t outlen);

/* True when next is a local path safe to redirect to after login: starts with
 * one '/', not "//" or "/\", no control characters. */
bool auth_next_is_local(const char *next);

/* Redirects a browser to the login page, coming back to next (a local path,
 * percent-encoded here) once logged in. */
void auth_redirect_login(struct http_request *req, const char *next);

#endif
