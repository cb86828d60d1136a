/* oidc.h - single sign-on with an OpenID Provider ([oidc], docs/auth.md): the
 * authorization code flow with PKCE (S256), state and nonce. A sign-in begins
 * with oidc_begin (a pending entry, in labd-web's memory, bound to the browser
 * by a cookie holding its state) and ends with oidc_finish on the callback:
 * state checked and used up, the code exchanged at the token endpoint, the ID
 * token verified (oidc_provider.c, oidc_jwt.c), the account resolved
 * (oidc_account.c) and a session made, as a password login makes one. */
#ifndef LABD_OIDC_H
#define LABD_OIDC_H

#include <stdbool.h>
#include <jansson.h>
#include <stddef.h>

#include "auth/oidc_account.h"
#include "store/sessions.h"
#include "store/users.h"

struct app;
struct labd_config;
struct http_request;

#define OIDC_STATE_LEN 43      /* base64url of 32 random bytes */
#define OIDC_COOKIE "labd_oidc" /* holds the state; "__Host-" behind TLS */
#define OIDC_PENDING_MAX 512   /* sign-ins begun and not finished */
#define OIDC_PENDING_TTL_S 600 /* a sign-in must finish within this */
#define OIDC_NEXT_MAX 1024
#define OIDC_LOCATION_MAX 4096

struct oidc;

/* Completes [oidc] as root before labd drops privileges: reads
 * client_secret_file into client_secret and checks the section (an issuer
 * needs a client_id and one secret; a plain-http issuer must be on loopback).
 * 0, or -1 with the reason logged. */
int oidc_load(struct labd_config *cfg);
/* labd-web's sign-in state, or NULL when [oidc] issuer is empty; *failed is
 * set when memory ran out. Free with oidc_free. */
struct oidc *oidc_new(const struct labd_config *cfg, bool *failed);
void oidc_free(struct oidc *o);

/* Begins a sign-in for a browser that comes back to next (a local path):
 * the provider's authorization URL into location and the cookie to set into
 * cookie. 0; -EBUSY (the provider is slow or too many sign-ins wait) or -EIO
 * (the provider cannot be reached) with err saying why. */
int oidc_begin(struct app *app, struct http_request *req, const char *next, char *location,
	       size_t location_len, char *cookie, size_t cookie_len, char *err, size_t errlen);

enum oidc_finish_result { OIDC_SIGNED_IN, OIDC_REFUSED, OIDC_UNAVAILABLE, OIDC_ERROR };

struct oidc_outcome {
	struct oidc_refusal why; /* REFUSED and UNAVAILABLE */
	struct user user;        /* SIGNED_IN */
	json_t *claims;          /* SIGNED_IN: the ID token's, the caller drops them */
	struct session session;
	char secret[SESSION_SECRET_LEN + 1];
	char next[OIDC_NEXT_MAX];
};

/* Ends the sign-in the callback request carries (its state, code or error,
 * and the state cookie), auditing the outcome. Nothing is created when it is
 * refused. */
enum oidc_finish_result oidc_finish(struct app *app, struct http_request *req,
				    struct oidc_outcome *out);
/* The Set-Cookie value that clears the state cookie. */
void oidc_cookie_clear(const struct app *app, char *out, size_t outlen);

/* Where a signed-out user goes after labd's logout: "/login?logout=sso" when
 * user signs in only through the provider (no local password) and the provider
 * advertises an end_session_endpoint; the login page then goes on to
 * /oidc/logout (a form's answer may not redirect to another origin: CSP
 * form-action). 1 with location set, 0 when it is plain /login. */
int oidc_logout_location(struct app *app, const struct user *user, char *location,
			 size_t location_len);
/* The provider's end_session_endpoint (RP-initiated logout) with labd's
 * client id, coming back to labd's login page; 1 with location set, 0 when the
 * provider advertises none (or single sign-on is off). */
int oidc_end_session_url(struct app *app, struct http_request *req, char *location,
			 size_t location_len);
/* The name the login page shows ("Sign in with <name>"), or NULL when off. */
const char *oidc_display_name(const struct app *app);

#endif
