/* handoff.c - the one-time handoff to a user origin and its cookie; see handoff.h. */
#include "auth/handoff.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "labd/app.h"
#include "auth/auth.h"
#include "auth/origin.h"
#include "config/config.h"
#include "http/http.h"
#include "labd/clock.h"
#include "labd/crypto.h"
#include "labd/log.h"
#include "store/audit.h"
#include "store/db.h"
#include "store/grants.h"
#include "store/ttlcache.h"

/* As auth.c's identity cache: a store change forgets entries at once. */
#define RUNTIME_IDENTITY_TTL_MS 10000

void handoff_start(struct http_request *req, const struct user *target, const char *next)
{
	const struct auth_identity *ident = http_identity(req);
	char code[GRANT_SECRET_LEN + 1], origin[300], encoded[2048], location[2500];

	if (origin_user_url(req, target->name, origin, sizeof(origin)) < 0) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_host", "header \"Host\" is too long");
		return;
	}
	if (grants_issue(http_app(req)->db, ident->session_id, target->id, time(NULL),
			 HANDOFF_CODE_TTL_S, code) < 0) {
		http_reply_internal(req);
		return;
	}
	http_url_encode(next, encoded, sizeof(encoded));
	snprintf(location, sizeof(location), "%s" HANDOFF_PATH "?code=%s&next=%s", origin, code,
		 encoded);
	explicit_bzero(code, sizeof(code));
	http_reply_redirect(req, location);
}

static void set_runtime_cookie(struct http_request *req, const char *secret)
{
	char cookie[256];

	/* No Domain attribute: host-only, so it reaches this user origin alone
	 * (neither labd's origin nor another user's). */
	snprintf(cookie, sizeof(cookie), "%s=%s; Path=/; HttpOnly; SameSite=Lax%s",
		 auth_cookie_name(http_app(req), RUNTIME_COOKIE_NAME), secret,
		 http_app(req)->cfg->secure_cookies ? "; Secure" : "");
	http_add_header(req, "Set-Cookie", cookie);
}

/* Each time an admin's session is handed to another user's origin. */
static void audit_access(struct http_request *req, const struct user *viewer, const char *user)
{
	if (audit_add(http_app(req)->db, time(NULL), viewer->name, "runtime.admin_access", user,
		      http_address(req), "opened the runtime through its user origin") < 0)
		log_error("audit: runtime.admin_access of %s by %s not recorded", user,
			  viewer->name);
}

void handoff_finish(struct http_request *req, const char *user)
{
	struct app *app = http_app(req);
	const char *code = http_query(req, "code"), *next = http_query(req, "next");
	char cookie[GRANT_SECRET_LEN + 1], prefix[USER_NAME_MAX + 8], fallback[USER_NAME_MAX + 8];
	struct user target, viewer;
	int64_t viewer_id = 0;
	int rc;

	rc = users_find_by_name(app->db, user, &target);
	if (rc == 1 && code)
		rc = grants_redeem(app->db, code, target.id, time(NULL), cookie, &viewer_id);
	else if (rc == 1)
		rc = 0;
	if (rc == 1)
		rc = users_find_by_id(app->db, viewer_id, &viewer);
	if (rc < 0) {
		http_reply_internal(req);
		return;
	}
	if (rc == 0) {
		http_reply_error(req, MHD_HTTP_FORBIDDEN, "handoff_invalid",
				 "query field \"code\" is unknown, used, expired or for another "
				 "origin; open the runtime again from the dashboard");
		return;
	}
	if (viewer.id != target.id)
		audit_access(req, &viewer, user);
	set_runtime_cookie(req, cookie);
	explicit_bzero(cookie, sizeof(cookie));
	snprintf(prefix, sizeof(prefix), "/user/%s/", user);
	snprintf(fallback, sizeof(fallback), "/user/%s/", user);
	/* Only back into this user's runtime: never an open redirect. */
	http_reply_redirect(req, next && auth_next_is_local(next) &&
					 strncmp(next, prefix, strlen(prefix)) == 0
				 ? next
				 : fallback);
}

/* Resolves a runtime cookie on user's origin into *id; 1, 0 or -1. */
static int identify_runtime_cookie(struct http_request *req, const char *user,
				   const char *secret, struct auth_identity *id)
{
	struct app *app = http_app(req);
	struct user target;
	int64_t viewer_id, session_id;
	int rc = users_find_by_name(app->db, user, &target);

	if (rc == 1)
		rc = grants_lookup(app->db, secret, target.id, app->session, time(NULL), &viewer_id,
				   &session_id);
	if (rc == 1)
		rc = users_find_by_id(app->db, viewer_id, &id->user);
	if (rc <= 0)
		return rc;
	if (id->user.disabled)
		return 0;
	id->kind = AUTH_RUNTIME;
	id->session_id = session_id;
	return 1;
}

int handoff_identify(struct http_request *req, const char *user)
{
	struct app *app = http_app(req);
	const char *authz = http_header(req, "Authorization");
	const char *secret = http_cookie(req, auth_cookie_name(app, RUNTIME_COOKIE_NAME));
	struct auth_identity *id = http_identity(req), cached;
	uint64_t gen = db_generation(app->db, DB_IDENTITIES); /* before the read */
	unsigned char key[TTLCACHE_KEY_LEN];
	char keytext[USER_NAME_MAX + GRANT_SECRET_LEN + 8];
	long long now_ms = clock_ms();
	int rc;

	if (authz && strncasecmp(authz, "Bearer ", 7) == 0)
		return auth_identify(req); /* an API client's token, as on labd's origin */
	memset(id, 0, sizeof(*id));
	if (!secret)
		return 0;
	/* The cache key binds the origin too: a cookie good on one user origin
	 * is never taken from the cache for another. */
	snprintf(keytext, sizeof(keytext), "rt:%s:%s", user, secret);
	crypto_sha256(keytext, strlen(keytext), key);
	explicit_bzero(keytext, sizeof(keytext));
	if (ttlcache_get(app->identities, key, gen, now_ms, &cached) &&
	    cached.kind == AUTH_RUNTIME) {
		*id = cached;
		return 0;
	}
	rc = identify_runtime_cookie(req, user, secret, id);
	if (rc <= 0)
		memset(id, 0, sizeof(*id));
	else
		ttlcache_put(app->identities, key, gen, now_ms + RUNTIME_IDENTITY_TTL_MS, id);
	return rc < 0 ? -1 : 0;
}
