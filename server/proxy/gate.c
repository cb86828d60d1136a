/* gate.c - see gate.h. */
#include "proxy/gate.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "labd/app.h"
#include "config/config.h"
#include "auth/auth.h"
#include "auth/handoff.h"
#include "auth/origin.h"
#include "auth/scope.h"
#include "labd/clock.h"
#include "http/http.h"
#include "http/static.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "labd/str.h"
#include "proxy/proxy.h"
#include "runtime/runtime.h"
#include "store/db.h"
#include "store/runtimes.h"
#include "store/ttlcache.h"
#include "store/users.h"

/* A user's live runtime is reused from app->runtimes for at most this long;
 * every state change bumps db_generation(DB_RUNTIMES) and forgets it at once. */
#define RUNTIME_CACHE_TTL_MS 2000
_Static_assert(USER_NAME_MAX <= TTLCACHE_KEY_LEN, "a user name is its own cache key");

int gate_user(const char *path, char *out, size_t outlen)
{
	const char *name = path + 6;
	size_t len;

	/* the prefix first: a shorter path ends before path + 6 */
	if (strncmp(path, "/user/", 6) != 0)
		return -1;
	len = strcspn(name, "/");
	if (len == 0 || len >= outlen)
		return -1;
	memcpy(out, name, len);
	out[len] = '\0';
	return parse_user_name_ok(out) ? 0 : -1;
}

/* Browsers get pages and redirects; scripts get JSON. */
static bool wants_html(struct http_request *req)
{
	const char *accept = http_header(req, "Accept");
	return http_method_is(req, "GET") && accept && strstr(accept, "text/html");
}

static void reply_login(struct http_request *req)
{
	if (!wants_html(req)) {
		http_reply_error(req, MHD_HTTP_UNAUTHORIZED, "unauthorized",
				 "log in or send an API token");
		return;
	}
	auth_redirect_login(req, http_raw_uri(req));
}

static void reply_not_running(struct http_request *req, const char *user, const struct runtime *r,
			      int found)
{
	const char *state = found ? runtimes_state_name(r->state) : "stopped";

	if (wants_html(req)) {
		static_serve_html(req, MHD_HTTP_SERVICE_UNAVAILABLE, "runtime.html");
		return;
	}
	if (found && r->state == RUNTIME_STARTING)
		http_add_header(req, "Retry-After", "2");
	http_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, "runtime_not_running",
			 "the runtime of %s is %s; start it with POST /api/v1/me/runtime", user,
			 state);
}

/* The user's live runtime (1), none (0) or -1, from the cache when it can;
 * records the request as activity at most every RUNTIME_TOUCH_INTERVAL_S. */
static int live_runtime(struct app *app, const char *user, struct runtime *r)
{
	unsigned char key[TTLCACHE_KEY_LEN] = {0};
	uint64_t gen = db_generation(app->db, DB_RUNTIMES); /* before the read */
	long long now_ms = clock_ms();
	int64_t now = time(NULL);
	int found = 1;

	memcpy(key, user, strnlen(user, TTLCACHE_KEY_LEN)); /* names are at most 32 bytes */
	if (!ttlcache_get(app->runtimes, key, gen, now_ms, r)) {
		found = runtimes_live_by_name(app->db, user, r);
		if (found == 1)
			ttlcache_put(app->runtimes, key, gen, now_ms + RUNTIME_CACHE_TTL_MS, r);
	}
	if (found == 1 && r->state == RUNTIME_RUNNING &&
	    r->last_activity < now - RUNTIME_TOUCH_INTERVAL_S) { /* skip a no-op UPDATE */
		runtimes_touch(app->db, r->id, now);
		r->last_activity = now;
		ttlcache_put(app->runtimes, key, gen, now_ms + RUNTIME_CACHE_TTL_MS, r);
	}
	return found;
}

/* Whether the identified viewer may reach user's runtime: its owner, or an
 * admin when [runtime] admin_access is on and only through the user origin's
 * handoff (audited there), never with a bearer token or in path mode. */
static bool may_reach(struct http_request *req, const char *user)
{
	const struct auth_identity *ident = http_identity(req);
	const struct labd_config *cfg = http_app(req)->cfg;

	if (strcmp(ident->user.name, user) == 0)
		return true;
	return ident->user.role == USER_ROLE_ADMIN && cfg->admin_access && cfg->origin_per_user &&
	       (ident->kind == AUTH_COOKIE || ident->kind == AUTH_RUNTIME);
}

static void reply_forbidden(struct http_request *req)
{
	if (wants_html(req))
		static_serve_html(req, MHD_HTTP_FORBIDDEN, "403.html");
	else
		http_reply_error(req, MHD_HTTP_FORBIDDEN, "forbidden",
				 "this runtime belongs to another user");
}

/* Ownership and Origin once identified; true when the request may go on. */
static bool allowed(struct http_request *req, const char *user)
{
	const struct auth_identity *ident = http_identity(req);

	if (!may_reach(req, user)) {
		reply_forbidden(req);
		return false;
	}
	/* A kernel runs code: a token reaches the runtime only with that scope. */
	if (ident->kind == AUTH_TOKEN && !(ident->scopes & SCOPE_RUNTIMES)) {
		http_reply_error(req, MHD_HTTP_FORBIDDEN, "insufficient_scope",
				 "this API token lacks the scope \"runtimes\"");
		return false;
	}
	/* Jupyter skips its own XSRF and Origin checks for token-authenticated
	 * requests, so labd refuses cross-origin writes and WebSocket upgrades
	 * itself for cookie-borne credentials: SameSite=Lax still sends a
	 * cookie from another port, or another user origin of the same site,
	 * and a kernel channel runs code. */
	if ((http_is_state_changing(req) || http_header(req, "Upgrade")) &&
	    ident->kind != AUTH_TOKEN && !auth_origin_ok(req)) {
		http_reply_error(req, MHD_HTTP_FORBIDDEN, "csrf_failed",
				 "cross-origin request refused");
		return false;
	}
	return true;
}

/* Sends a browser to labd's origin for path (a runtime path): that origin
 * logs it in and hands it back, or shows the runtime's start page. */
static void bounce_to_ui(struct http_request *req)
{
	char ui[300], location[2500];

	if (origin_ui_url(req, ui, sizeof(ui)) < 0) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_host", "header \"Host\" is too long");
		return;
	}
	snprintf(location, sizeof(location), "%s%s", ui, http_raw_uri(req));
	http_reply_redirect(req, location);
}

/* Proxies to user's running runtime, or says it is not running. */
static void serve_runtime(struct http_request *req, const char *user, bool user_origin)
{
	struct app *app = http_app(req);
	char location[USER_NAME_MAX + 16];
	struct proxy_target target;
	struct runtime r;
	int found;

	if (http_path(req)[6 + strlen(user)] == '\0') { /* "/user/alice" -> "/user/alice/" */
		snprintf(location, sizeof(location), "/user/%s/", user);
		http_reply_redirect(req, location);
		return;
	}
	found = live_runtime(app, user, &r);
	if (found < 0) {
		http_reply_internal(req);
		return;
	}
	if (found == 0 || r.state != RUNTIME_RUNNING) {
		if (user_origin && wants_html(req))
			bounce_to_ui(req); /* the start page is labd's, on labd's origin */
		else
			reply_not_running(req, user, &r, found);
		return;
	}
	memset(&target, 0, sizeof(target));
	if (runtime_socket_path(&r, target.socket_path, sizeof(target.socket_path)) < 0) {
		http_reply_error(req, MHD_HTTP_BAD_GATEWAY, "bad_endpoint",
				 "the runtime's endpoint is not one this proxy reaches");
		return;
	}
	str_copy(target.token, sizeof(target.token), r.token);
	str_copy(target.owner, sizeof(target.owner), user);
	target.peer_uid = (uid_t)(app->cfg->uid_base + r.user_id);
	target.owner_id = r.user_id;
	proxy_begin(req, app->proxy, &target);
}

/* A runtime path on user's own origin: bearer token or runtime cookie. */
static void on_user_origin(struct http_request *req, const char *user)
{
	if (handoff_identify(req, user) < 0) {
		http_reply_internal(req);
		return;
	}
	if (http_identity(req)->kind == AUTH_NONE) {
		if (wants_html(req))
			bounce_to_ui(req);
		else
			http_reply_error(req, MHD_HTTP_UNAUTHORIZED, "unauthorized",
					 "open the runtime from labd's dashboard or send an API "
					 "token");
		return;
	}
	if (allowed(req, user))
		serve_runtime(req, user, true);
}

/* A runtime path on labd's origin with per-user origins on: the content is
 * never served here. A logged-in browser is handed off to the user origin
 * (or shown the start page while the runtime is not running); anything else
 * is told where the runtime lives. */
static void on_ui_origin(struct http_request *req, const char *user)
{
	const struct auth_identity *ident = http_identity(req);
	char origin[300];
	struct user target;
	struct runtime r;
	int found;

	if (auth_identify(req) < 0) {
		http_reply_internal(req);
		return;
	}
	if (ident->kind == AUTH_NONE && wants_html(req)) {
		reply_login(req);
		return;
	}
	if (ident->kind == AUTH_COOKIE && (http_method_is(req, "GET") || http_method_is(req, "HEAD"))) {
		if (!may_reach(req, user)) {
			reply_forbidden(req);
			return;
		}
		found = live_runtime(http_app(req), user, &r);
		if (found >= 0 && (found == 0 || r.state != RUNTIME_RUNNING) && wants_html(req)) {
			reply_not_running(req, user, &r, found);
			return;
		}
		found = users_find_by_name(http_app(req)->db, user, &target);
		if (found < 0)
			http_reply_internal(req);
		else if (found == 0)
			reply_forbidden(req);
		else
			handoff_start(req, &target, http_raw_uri(req));
		return;
	}
	if (origin_user_url(req, user, origin, sizeof(origin)) < 0)
		origin[0] = '\0';
	http_reply_error(req, MHD_HTTP_MISDIRECTED_REQUEST, "wrong_origin",
			 "runtime paths are served on the user's own origin %s", origin);
}

void gate_begin(struct http_request *req)
{
	char user[USER_NAME_MAX + 1], host_user[USER_NAME_MAX + 1];

	if (gate_user(http_path(req), user, sizeof(user)) < 0) {
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no such runtime path");
		return;
	}
	switch (origin_of_request(req, host_user)) {
	case ORIGIN_USER:
		/* The Host header decides whose runtime this origin serves. */
		if (strcmp(host_user, user) != 0)
			http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found",
					 "this origin serves only the runtime of %s", host_user);
		else
			on_user_origin(req, user);
		return;
	case ORIGIN_UNKNOWN:
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no such user origin");
		return;
	case ORIGIN_UI:
		break;
	}
	if (http_app(req)->cfg->origin_per_user) {
		on_ui_origin(req, user);
		return;
	}
	/* origin_mode = path: the opt-out, everything on labd's origin */
	if (auth_identify(req) < 0) {
		http_reply_internal(req);
		return;
	}
	if (http_identity(req)->kind == AUTH_NONE) {
		reply_login(req);
		return;
	}
	if (allowed(req, user))
		serve_runtime(req, user, false);
}
