/* routes.c - the route table and the gate in front of every handler; see routes.h. */
#include "web/routes.h"

#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "auth/auth.h"
#include "auth/handoff.h"
#include "auth/origin.h"
#include "http/http.h"
#include "http/static.h"
#include "labd/log.h"
#include "api/pages.h"
#include "web/scrape.h"

static const struct route routes[] = {
	{"GET", "/api/v1/health", ROUTE_PUBLIC, ROUTE_API, api_health},
	{"POST", "/api/v1/login", ROUTE_PUBLIC, ROUTE_API, api_login},
	{"POST", "/api/v1/logout", ROUTE_USER, ROUTE_API, api_logout},
	{"GET", "/api/v1/me", ROUTE_USER, ROUTE_API, api_me},
	{"POST", "/api/v1/me/password", ROUTE_USER, ROUTE_API, api_me_password},
	{"GET", "/api/v1/me/tokens", ROUTE_USER, ROUTE_API, api_tokens_list},
	{"POST", "/api/v1/me/tokens", ROUTE_USER, ROUTE_API, api_tokens_create},
	{"DELETE", "/api/v1/me/tokens/{}", ROUTE_USER, ROUTE_API, api_tokens_delete},
	{"POST", "/api/v1/me/runtime", ROUTE_USER, ROUTE_API, api_runtime_start},
	{"GET", "/api/v1/me/runtime", ROUTE_USER, ROUTE_API, api_runtime_get},
	{"DELETE", "/api/v1/me/runtime", ROUTE_USER, ROUTE_API, api_runtime_stop},
	{"GET", "/api/v1/me/runtime/events", ROUTE_USER, ROUTE_API, api_runtime_events},
	{"GET", "/api/v1/gpus", ROUTE_USER, ROUTE_API, api_gpus},
	/* Deprecated, gone in the next release. Public: the redirect changes and reveals
	 * nothing, and the new path runs the whole gate, so a client that follows it gets
	 * today's answer (401 and 403 included) from one place. */
	{"POST", "/api/v1/me/session", ROUTE_PUBLIC, ROUTE_API, api_runtime_moved},
	{"GET", "/api/v1/me/session", ROUTE_PUBLIC, ROUTE_API, api_runtime_moved},
	{"DELETE", "/api/v1/me/session", ROUTE_PUBLIC, ROUTE_API, api_runtime_moved},
	{"GET", "/api/v1/users", ROUTE_ADMIN, ROUTE_API, api_users_list},
	{"POST", "/api/v1/users", ROUTE_ADMIN, ROUTE_API, api_users_create},
	{"GET", "/api/v1/users/{}", ROUTE_ADMIN, ROUTE_API, api_users_get},
	{"PATCH", "/api/v1/users/{}", ROUTE_ADMIN, ROUTE_API, api_users_patch},
	{"DELETE", "/api/v1/users/{}", ROUTE_ADMIN, ROUTE_API, api_users_delete},
	{"GET", "/api/v1/audit", ROUTE_ADMIN, ROUTE_API, api_audit_list},
	/* governance: plans, groups, quotas */
	{"GET", "/api/v1/me/quota", ROUTE_USER, ROUTE_API, api_me_quota},
	{"GET", "/api/v1/users/{}/quota", ROUTE_ADMIN, ROUTE_API, api_user_quota_get},
	{"PUT", "/api/v1/users/{}/quota", ROUTE_ADMIN, ROUTE_API, api_user_quota_put},
	{"GET", "/api/v1/plans", ROUTE_ADMIN, ROUTE_API, api_plans_list},
	{"POST", "/api/v1/plans", ROUTE_ADMIN, ROUTE_API, api_plans_create},
	{"GET", "/api/v1/plans/{}", ROUTE_ADMIN, ROUTE_API, api_plans_get},
	{"PUT", "/api/v1/plans/{}", ROUTE_ADMIN, ROUTE_API, api_plans_put},
	{"DELETE", "/api/v1/plans/{}", ROUTE_ADMIN, ROUTE_API, api_plans_delete},
	{"GET", "/api/v1/groups", ROUTE_ADMIN, ROUTE_API, api_groups_list},
	{"POST", "/api/v1/groups", ROUTE_ADMIN, ROUTE_API, api_groups_create},
	{"GET", "/api/v1/groups/{}", ROUTE_ADMIN, ROUTE_API, api_groups_get},
	{"PUT", "/api/v1/groups/{}", ROUTE_ADMIN, ROUTE_API, api_groups_put},
	{"DELETE", "/api/v1/groups/{}", ROUTE_ADMIN, ROUTE_API, api_groups_delete},
	{"GET", "/api/v1/me/usage", ROUTE_USER, ROUTE_API, api_usage_me},
	{"GET", "/api/v1/usage", ROUTE_ADMIN, ROUTE_API, api_usage_all},
	{"GET", "/", ROUTE_PUBLIC, ROUTE_PAGE, pages_root},
	{"GET", "/login", ROUTE_PUBLIC, ROUTE_PAGE, pages_login_form},
	{"POST", "/login", ROUTE_PUBLIC, ROUTE_PAGE, pages_login_post},
	{"POST", "/logout", ROUTE_USER, ROUTE_PAGE, pages_logout_post},
	{"GET", "/dashboard", ROUTE_USER, ROUTE_PAGE, pages_dashboard},
	{"GET", "/admin", ROUTE_ADMIN, ROUTE_PAGE, pages_admin},
	/* Public here: a scraper's token is not an API token; the handler checks. */
	{"GET", "/metrics", ROUTE_PUBLIC, ROUTE_API, scrape_metrics},
};

static void routes_serve(struct http_request *req);

static bool is_api_path(const char *path)
{
	return strncmp(path, "/api/", 5) == 0 || strcmp(path, "/api") == 0;
}

static void reply_not_found(struct http_request *req)
{
	if (is_api_path(http_path(req)))
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no such API path: %s",
				 http_path(req));
	else
		static_serve_html(req, MHD_HTTP_NOT_FOUND, "404.html");
}

/* An unauthenticated request: JSON 401 for the API, a login redirect for pages. */
static void reply_unauthenticated(struct http_request *req, enum route_kind kind)
{
	if (kind == ROUTE_API || !http_method_is(req, "GET")) {
		http_reply_error(req, MHD_HTTP_UNAUTHORIZED, "unauthorized",
				 "log in or send an API token");
		return;
	}
	auth_redirect_login(req, http_path(req));
}

static void reply_forbidden(struct http_request *req, enum route_kind kind, const char *code,
			    const char *message)
{
	if (kind == ROUTE_PAGE && http_method_is(req, "GET"))
		static_serve_html(req, MHD_HTTP_FORBIDDEN, "403.html");
	else
		http_reply_error(req, MHD_HTTP_FORBIDDEN, code, "%s", message);
}

/* Authentication, role, Origin and CSRF checks; true when the handler may run. */
static bool gate(struct http_request *req, const struct route *r)
{
	const struct auth_identity *ident = http_identity(req); /* filled just below */

	if (auth_identify(req) < 0) {
		http_reply_internal(req);
		return false;
	}
	/* A page served by a user's runtime gets nothing from labd's UI or API,
	 * not even a read: its Origin is some user's code. */
	if (origin_header_is_user(req)) {
		reply_forbidden(req, r->kind, "csrf_failed",
				"requests from a runtime's origin are refused");
		return false;
	}
	/* A cross-site form or fetch never gets to change anything, logged in or not
	 * (this also stops login CSRF). */
	if (http_is_state_changing(req) && !auth_origin_ok(req)) {
		reply_forbidden(req, r->kind, "csrf_failed", "cross-origin request refused");
		return false;
	}
	if (r->access == ROUTE_PUBLIC)
		return true;
	if (ident->kind == AUTH_NONE) {
		reply_unauthenticated(req, r->kind);
		return false;
	}
	if (r->access == ROUTE_ADMIN && ident->user.role != USER_ROLE_ADMIN) {
		reply_forbidden(req, r->kind, "forbidden", "this needs an administrator");
		return false;
	}
	if (http_is_state_changing(req) && ident->kind == AUTH_COOKIE && !auth_csrf_ok(req)) {
		reply_forbidden(req, r->kind, "csrf_failed",
				"missing or wrong CSRF token (send X-CSRF-Token)");
		return false;
	}
	return true;
}

/* What a user origin serves besides its runtime paths (gate.c): the handoff
 * that sets its cookie, and "/" leading into the runtime. labd's UI, API and
 * static files are not served there, so a user's code cannot reach them
 * same-origin. */
static void dispatch_user_origin(struct http_request *req, const char *user)
{
	char location[USER_NAME_MAX + 16];
	bool get = http_method_is(req, "GET") || http_method_is(req, "HEAD");

	if (get && strcmp(http_path(req), HANDOFF_PATH) == 0) {
		handoff_finish(req, user);
	} else if (get && strcmp(http_path(req), "/") == 0) {
		snprintf(location, sizeof(location), "/user/%s/", user);
		http_reply_redirect(req, location);
	} else {
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found",
				 "a user origin serves only its runtime under /user/%s/", user);
	}
}

void routes_dispatch(struct http_request *req)
{
	char host_user[USER_NAME_MAX + 1];

	switch (origin_of_request(req, host_user)) {
	case ORIGIN_USER:
		dispatch_user_origin(req, host_user);
		return;
	case ORIGIN_UNKNOWN:
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no such user origin");
		return;
	case ORIGIN_UI:
		break;
	}
	routes_serve(req);
}

/* labd's own origin: static files, then the route table. */
static void routes_serve(struct http_request *req)
{
	struct route_match *match = http_match(req);
	const char *path = http_path(req);
	/* HEAD is answered as GET; libmicrohttpd drops the body. */
	const char *method = http_method_is(req, "HEAD") ? "GET" : http_method(req);

	if (strncmp(path, "/static/", 8) == 0) {
		if (strcmp(method, "GET") != 0) {
			http_add_header(req, "Allow", "GET, HEAD");
			http_reply_error(req, MHD_HTTP_METHOD_NOT_ALLOWED, "method_not_allowed",
					 "%s is not allowed here", http_method(req));
			return;
		}
		static_serve(req);
		return;
	}
	if (router_match(routes, sizeof(routes) / sizeof(routes[0]), method, path, match) < 0) {
		if (match->allow[0] == '\0') {
			reply_not_found(req);
			return;
		}
		http_add_header(req, "Allow", match->allow);
		http_reply_error(req, MHD_HTTP_METHOD_NOT_ALLOWED, "method_not_allowed",
				 "%s is not allowed on %s (allowed: %s)", http_method(req), path,
				 match->allow);
		return;
	}
	if (gate(req, match->route))
		match->route->handler(req);
	log_debug("%s %s %s -> %u", http_address(req), http_method(req), path, http_status(req));
}
