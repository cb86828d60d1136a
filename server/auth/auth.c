/* auth.c - request identity, CSRF/Origin checks and the login procedure; see auth.h. */
#include "auth/auth.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "labd/app.h"
#include "store/sessions.h"
#include "auth/handoff.h"
#include "auth/password.h"
#include "auth/scope.h"
#include "config/config.h"
#include "labd/clock.h"
#include "store/audit.h"
#include "labd/crypto.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "http/http.h"
#include "store/db.h"
#include "store/tokens.h"
#include "store/ttlcache.h"

/* A resolved identity is reused for at most this long without asking the
 * store. Every change that ends a session or token or changes a user bumps
 * the store's identity generation and so forgets it at once (db.h); this
 * bound is a safety net, and it keeps last-seen times fresh. */
#define IDENTITY_TTL_MS 10000

static int identify_by_token(struct http_request *req, const char *token, int64_t now,
			     long long *ttl_ms)
{
	struct auth_identity *id = http_identity(req);
	struct token_info t;
	int rc = tokens_lookup(http_app(req)->db, token, now, &t);

	if (rc <= 0)
		return rc;
	if (t.expires_at && now >= t.expires_at) {
		id->token_expired_at = t.expires_at;
		return 0;
	}
	rc = users_find_by_id(http_app(req)->db, t.user_id, &id->user);
	if (rc <= 0 || id->user.disabled)
		return rc < 0 ? -1 : 0;
	id->kind = AUTH_TOKEN;
	id->token_id = t.id;
	/* Cut down to the role the owner has now: a demoted admin's token
	 * loses its admin scopes at once, not when it is revoked. */
	id->scopes = (scope_parse_list(t.scopes, id->user.role) | SCOPE_IDENTIFY) &
		     scope_of_role(id->user.role);
	*ttl_ms = IDENTITY_TTL_MS;
	/* never cached past the token's expiry */
	if (t.expires_at && (t.expires_at - now) * 1000 < *ttl_ms)
		*ttl_ms = (t.expires_at - now) * 1000;
	return 1;
}

static int identify_by_cookie(struct http_request *req, const char *secret, int64_t now,
			      long long *ttl_ms)
{
	struct auth_identity *id = http_identity(req);
	struct session s;
	int rc = sessions_lookup(http_app(req)->db, secret, http_app(req)->session, now, &s);

	if (rc <= 0)
		return rc;
	rc = users_find_by_id(http_app(req)->db, s.user_id, &id->user);
	if (rc <= 0 || id->user.disabled)
		return rc < 0 ? -1 : 0;
	id->kind = AUTH_COOKIE;
	id->session_id = s.id;
	id->scopes = scope_of_role(id->user.role);
	snprintf(id->csrf_token, sizeof(id->csrf_token), "%s", s.csrf_token);
	/* never past the session's own end, by lifetime or by idleness */
	int64_t left = s.expires_at - now;
	if (s.last_seen + http_app(req)->session->idle_s - now < left)
		left = s.last_seen + http_app(req)->session->idle_s - now;
	*ttl_ms = left * 1000 < IDENTITY_TTL_MS ? left * 1000 : IDENTITY_TTL_MS;
	return 1;
}

int auth_identify(struct http_request *req)
{
	const char *authz = http_header(req, "Authorization");
	const char *cookie = http_cookie(req, auth_cookie_name(http_app(req), SESSION_COOKIE_NAME));
	bool bearer = authz && strncasecmp(authz, "Bearer ", 7) == 0;
	const char *secret = bearer ? authz + 7 : cookie;
	enum auth_kind kind = bearer ? AUTH_TOKEN : AUTH_COOKIE;
	/* taken before the store is read: a change in between makes what is
	 * read here stale at once */
	uint64_t gen = db_generation(http_app(req)->db, DB_IDENTITIES);
	long long now_ms = clock_ms(), ttl_ms = 0;
	unsigned char key[TTLCACHE_KEY_LEN];
	struct auth_identity cached;
	int64_t now = time(NULL);
	struct auth_identity *id = http_identity(req);
	int rc = 0;

	memset(id, 0, sizeof(*id));
	if (!secret)
		return 0;
	/* Keyed by the secret's SHA-256, so the cache holds no usable secret. */
	crypto_sha256(secret, strlen(secret), key);
	if (ttlcache_get(http_app(req)->identities, key, gen, now_ms, &cached) &&
	    cached.kind == kind) {
		*id = cached;
		explicit_bzero(&cached, sizeof(cached));
		return 0;
	}
	/* An explicit bearer token wins over an ambient cookie. */
	if (bearer)
		rc = identify_by_token(req, secret, now, &ttl_ms);
	else
		rc = identify_by_cookie(req, secret, now, &ttl_ms);
	if (rc <= 0) {
		int64_t expired_at = id->token_expired_at;
		memset(id, 0, sizeof(*id)); /* AUTH_NONE */
		id->token_expired_at = expired_at;
	}
	else if (ttl_ms > 0)
		ttlcache_put(http_app(req)->identities, key, gen, now_ms + ttl_ms, id);
	return rc < 0 ? -1 : 0;
}

bool auth_csrf_ok(struct http_request *req)
{
	const char *sent = http_header(req, "X-CSRF-Token");
	char form_value[SESSION_CSRF_LEN + 2];
	size_t want = strlen(http_identity(req)->csrf_token);
	const char *body = http_body(req, NULL);

	if (!sent && http_content_type_is(req, "application/x-www-form-urlencoded") &&
	    http_form_field(body, "csrf_token", form_value, sizeof(form_value)) == 0)
		sent = form_value;
	return sent && want > 0 && strlen(sent) == want &&
	       crypto_equal(sent, http_identity(req)->csrf_token, want);
}

bool auth_origin_ok(struct http_request *req)
{
	const char *origin = http_header(req, "Origin");
	const char *host = http_header(req, "Host");
	const char *sep;

	if (!origin)
		return true; /* not a browser cross-origin request; CSRF token still applies */
	sep = strstr(origin, "://");
	return host && sep && strcasecmp(sep + 3, host) == 0;
}

bool auth_next_is_local(const char *next)
{
	if (!next || next[0] != '/' || next[1] == '/' || next[1] == '\\')
		return false;
	for (const unsigned char *p = (const unsigned char *)next; *p; p++)
		if (*p < 0x21 || *p == 0x7f || *p == '\\')
			return false;
	return true;
}

const char *auth_cookie_name(const struct app *app, const char *base)
{
	if (!app->cfg->secure_cookies)
		return base;
	if (strcmp(base, SESSION_COOKIE_NAME) == 0)
		return "__Host-" SESSION_COOKIE_NAME;
	if (strcmp(base, RUNTIME_COOKIE_NAME) == 0)
		return "__Host-" RUNTIME_COOKIE_NAME;
	return base;
}

void auth_cookie_header(const struct app *app, const char *secret, char *out, size_t outlen)
{
	const char *secure = app->cfg->secure_cookies ? "; Secure" : "";
	const char *name = auth_cookie_name(app, SESSION_COOKIE_NAME);

	if (secret)
		snprintf(out, outlen, "%s=%s; Path=/; HttpOnly; SameSite=Lax%s", name, secret,
			 secure);
	else
		snprintf(out, outlen, "%s=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0%s", name,
			 secure);
}

void auth_redirect_login(struct http_request *req, const char *next)
{
	char encoded[6144], location[6200]; /* an /open link, its query encoded again */

	http_url_encode(next, encoded, sizeof(encoded));
	snprintf(location, sizeof(location), "/login?next=%s", encoded);
	http_reply_redirect(req, location);
}
