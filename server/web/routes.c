/* routes.c - the route table and the gate in front of every handler; see routes.h. */
#include "web/routes.h"

#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "auth/auth.h"
#include "auth/handoff.h"
#include "auth/origin.h"
#include "auth/scope.h"
#include "http/http.h"
#include "http/static.h"
#include "labd/app.h"
#include "labd/log.h"
#include "api/pages.h"
#include "api/tuning.h"
#include "store/db.h"
#include "web/scrape.h"

static const struct route routes[] = {
	{"GET", "/api/v1/health", ROUTE_PUBLIC, ROUTE_API, api_health, 0},
	{"POST", "/api/v1/login", ROUTE_PUBLIC, ROUTE_API, api_login, 0},
	{"GET", "/api/v1/sso", ROUTE_PUBLIC, ROUTE_API, api_sso, 0},
	{"POST", "/api/v1/logout", ROUTE_USER, ROUTE_API, api_logout, SCOPE_IDENTIFY},
	{"GET", "/api/v1/me", ROUTE_USER, ROUTE_API, api_me, SCOPE_IDENTIFY},
	{"POST", "/api/v1/me/password", ROUTE_USER, ROUTE_API, api_me_password, SCOPE_ACCOUNT},
	{"GET", "/api/v1/me/tokens", ROUTE_USER, ROUTE_API, api_tokens_list, SCOPE_TOKENS},
	{"POST", "/api/v1/me/tokens", ROUTE_USER, ROUTE_API, api_tokens_create, SCOPE_TOKENS},
	{"DELETE", "/api/v1/me/tokens/{}", ROUTE_USER, ROUTE_API, api_tokens_delete, SCOPE_TOKENS},
	{"POST", "/api/v1/me/runtime", ROUTE_USER, ROUTE_API, api_runtime_start, SCOPE_RUNTIMES},
	{"GET", "/api/v1/me/runtime", ROUTE_USER, ROUTE_API, api_runtime_get, SCOPE_RUNTIMES},
	{"DELETE", "/api/v1/me/runtime", ROUTE_USER, ROUTE_API, api_runtime_stop, SCOPE_RUNTIMES},
	{"GET", "/api/v1/me/runtime/events", ROUTE_USER, ROUTE_API, api_runtime_events, SCOPE_RUNTIMES},
	{"POST", "/api/v1/me/runtime/open", ROUTE_USER, ROUTE_API, api_runtime_open, SCOPE_RUNTIMES},
	{"GET", "/api/v1/me/runtime/open", ROUTE_USER, ROUTE_API, api_runtime_open_get,
	 SCOPE_RUNTIMES},
	{"GET", "/api/v1/gpus", ROUTE_USER, ROUTE_API, api_gpus, SCOPE_READ_GPUS},
	{"POST", "/api/v1/gpus/rescan", ROUTE_ADMIN, ROUTE_API, api_gpus_rescan,
	 SCOPE_ADMIN_RUNTIMES},
	{"GET", "/api/v1/images", ROUTE_USER, ROUTE_API, api_images_list, SCOPE_RUNTIMES},
	/* training jobs and their warm pools (docs/jobs.md) */
	{"POST", "/api/v1/jobs", ROUTE_USER, ROUTE_API, api_jobs_submit, SCOPE_JOBS},
	{"GET", "/api/v1/jobs", ROUTE_USER, ROUTE_API, api_jobs_list, SCOPE_JOBS},
	{"GET", "/api/v1/jobs/{}", ROUTE_USER, ROUTE_API, api_jobs_get, SCOPE_JOBS},
	{"POST", "/api/v1/jobs/{}/stop", ROUTE_USER, ROUTE_API, api_jobs_stop, SCOPE_JOBS},
	{"DELETE", "/api/v1/jobs/{}", ROUTE_USER, ROUTE_API, api_jobs_delete, SCOPE_JOBS},
	{"GET", "/api/v1/warm-pools", ROUTE_USER, ROUTE_API, api_warm_pools_list, SCOPE_JOBS},
	{"DELETE", "/api/v1/warm-pools/{}", ROUTE_USER, ROUTE_API, api_warm_pools_delete,
	 SCOPE_JOBS},
	/* notifications: the caller's webhooks (docs/jobs.md "Notifications") */
	{"POST", "/api/v1/webhooks", ROUTE_USER, ROUTE_API, api_webhooks_create, SCOPE_JOBS},
	{"GET", "/api/v1/webhooks", ROUTE_USER, ROUTE_API, api_webhooks_list, SCOPE_JOBS},
	{"DELETE", "/api/v1/webhooks/{}", ROUTE_USER, ROUTE_API, api_webhooks_delete, SCOPE_JOBS},
	{"GET", "/api/v1/webhooks/{}/deliveries", ROUTE_USER, ROUTE_API, api_webhooks_deliveries,
	 SCOPE_JOBS},
	/* tuning jobs: searches whose trials are jobs (docs/jobs.md "Tuning jobs") */
	{"POST", "/api/v1/tuning-jobs", ROUTE_USER, ROUTE_API, api_tuning_create, SCOPE_JOBS},
	{"GET", "/api/v1/tuning-jobs", ROUTE_USER, ROUTE_API, api_tuning_list, SCOPE_JOBS},
	{"GET", "/api/v1/tuning-jobs/{}", ROUTE_USER, ROUTE_API, api_tuning_get, SCOPE_JOBS},
	{"POST", "/api/v1/tuning-jobs/{}/stop", ROUTE_USER, ROUTE_API, api_tuning_stop, SCOPE_JOBS},
	/* a training job's log, metrics, samples and status events (docs/jobs.md) */
	{"GET", "/api/v1/jobs/{}/logs", ROUTE_USER, ROUTE_API, api_job_logs, SCOPE_JOBS},
	{"GET", "/api/v1/jobs/{}/metrics", ROUTE_USER, ROUTE_API, api_job_metrics, SCOPE_JOBS},
	{"GET", "/api/v1/jobs/{}/samples", ROUTE_USER, ROUTE_API, api_job_samples, SCOPE_JOBS},
	{"GET", "/api/v1/jobs/{}/report", ROUTE_USER, ROUTE_API, api_job_report, SCOPE_JOBS},
	{"GET", "/api/v1/jobs/{}/events", ROUTE_USER, ROUTE_API, api_job_events, SCOPE_JOBS},
	/* a shell into a running job, as a WebSocket: browsers open it with GET */
	{"GET", "/api/v1/jobs/{}/shell", ROUTE_USER, ROUTE_API, api_job_shell, SCOPE_JOBS},
	{"POST", "/api/v1/jobs/{}/shell", ROUTE_USER, ROUTE_API, api_job_shell, SCOPE_JOBS},
	/* Deprecated, gone in the next release. Public: the redirect changes and reveals
	 * nothing, and the new path runs the whole gate, so a client that follows it gets
	 * today's answer (401 and 403 included) from one place. */
	{"POST", "/api/v1/me/session", ROUTE_PUBLIC, ROUTE_API, api_runtime_moved, 0},
	{"GET", "/api/v1/me/session", ROUTE_PUBLIC, ROUTE_API, api_runtime_moved, 0},
	{"DELETE", "/api/v1/me/session", ROUTE_PUBLIC, ROUTE_API, api_runtime_moved, 0},
	{"GET", "/api/v1/users", ROUTE_ADMIN, ROUTE_API, api_users_list, SCOPE_ADMIN_USERS},
	{"POST", "/api/v1/users", ROUTE_ADMIN, ROUTE_API, api_users_create, SCOPE_ADMIN_USERS},
	{"POST", "/api/v1/users/import", ROUTE_ADMIN, ROUTE_API, api_users_import, SCOPE_ADMIN_USERS},
	{"GET", "/api/v1/users/{}", ROUTE_ADMIN, ROUTE_API, api_users_get, SCOPE_ADMIN_USERS},
	{"PATCH", "/api/v1/users/{}", ROUTE_ADMIN, ROUTE_API, api_users_patch, SCOPE_ADMIN_USERS},
	{"DELETE", "/api/v1/users/{}", ROUTE_ADMIN, ROUTE_API, api_users_delete, SCOPE_ADMIN_USERS},
	{"GET", "/api/v1/audit", ROUTE_ADMIN, ROUTE_API, api_audit_list, SCOPE_ADMIN_AUDIT},
	/* governance: plans, groups, quotas */
	{"GET", "/api/v1/me/quota", ROUTE_USER, ROUTE_API, api_me_quota, SCOPE_READ_QUOTA},
	{"GET", "/api/v1/users/{}/quota", ROUTE_ADMIN, ROUTE_API, api_user_quota_get, SCOPE_ADMIN_QUOTA},
	{"PUT", "/api/v1/users/{}/quota", ROUTE_ADMIN, ROUTE_API, api_user_quota_put, SCOPE_ADMIN_QUOTA},
	{"GET", "/api/v1/plans", ROUTE_ADMIN, ROUTE_API, api_plans_list, SCOPE_ADMIN_QUOTA},
	{"POST", "/api/v1/plans", ROUTE_ADMIN, ROUTE_API, api_plans_create, SCOPE_ADMIN_QUOTA},
	{"GET", "/api/v1/plans/{}", ROUTE_ADMIN, ROUTE_API, api_plans_get, SCOPE_ADMIN_QUOTA},
	{"PUT", "/api/v1/plans/{}", ROUTE_ADMIN, ROUTE_API, api_plans_put, SCOPE_ADMIN_QUOTA},
	{"DELETE", "/api/v1/plans/{}", ROUTE_ADMIN, ROUTE_API, api_plans_delete, SCOPE_ADMIN_QUOTA},
	{"GET", "/api/v1/groups", ROUTE_ADMIN, ROUTE_API, api_groups_list, SCOPE_ADMIN_QUOTA},
	{"POST", "/api/v1/groups", ROUTE_ADMIN, ROUTE_API, api_groups_create, SCOPE_ADMIN_QUOTA},
	{"GET", "/api/v1/groups/{}", ROUTE_ADMIN, ROUTE_API, api_groups_get, SCOPE_ADMIN_QUOTA},
	{"PUT", "/api/v1/groups/{}", ROUTE_ADMIN, ROUTE_API, api_groups_put, SCOPE_ADMIN_QUOTA},
	{"DELETE", "/api/v1/groups/{}", ROUTE_ADMIN, ROUTE_API, api_groups_delete, SCOPE_ADMIN_QUOTA},
	{"GET", "/api/v1/me/usage", ROUTE_USER, ROUTE_API, api_usage_me, SCOPE_READ_USAGE},
	{"GET", "/api/v1/usage", ROUTE_ADMIN, ROUTE_API, api_usage_all, SCOPE_ADMIN_USAGE},
	/* every user's live runtime, and an administrator's stop */
	{"GET", "/api/v1/runtimes", ROUTE_ADMIN, ROUTE_API, api_runtimes_list, SCOPE_ADMIN_RUNTIMES},
	{"DELETE", "/api/v1/runtimes/{}", ROUTE_ADMIN, ROUTE_API, api_runtimes_stop,
	 SCOPE_ADMIN_RUNTIMES},
	{"GET", "/", ROUTE_PUBLIC, ROUTE_PAGE, pages_root, 0},
	{"GET", "/login", ROUTE_PUBLIC, ROUTE_PAGE, pages_login_form, 0},
	{"POST", "/login", ROUTE_PUBLIC, ROUTE_PAGE, pages_login_post, 0},
	{"GET", "/oidc/login", ROUTE_PUBLIC, ROUTE_PAGE, pages_oidc_login, 0},
	{"GET", "/oidc/callback", ROUTE_PUBLIC, ROUTE_PAGE, pages_oidc_callback, 0},
	{"GET", "/oidc/logout", ROUTE_PUBLIC, ROUTE_PAGE, pages_oidc_logout, 0},
	{"POST", "/logout", ROUTE_USER, ROUTE_PAGE, pages_logout_post, SCOPE_IDENTIFY},
	{"GET", "/dashboard", ROUTE_USER, ROUTE_PAGE, pages_dashboard, SCOPE_IDENTIFY},
	{"GET", "/open", ROUTE_USER, ROUTE_PAGE, pages_open, SCOPE_IDENTIFY},
	/* a training job's page; its script reads the id from the path (docs/jobs.md) */
	{"GET", "/jobs/{}", ROUTE_USER, ROUTE_PAGE, pages_job, SCOPE_IDENTIFY},
	{"GET", "/jobs/{}/report", ROUTE_USER, ROUTE_PAGE, pages_job_report, SCOPE_IDENTIFY},
	{"GET", "/tuning/{}", ROUTE_USER, ROUTE_PAGE, api_tuning_page, SCOPE_IDENTIFY},
	{"GET", "/admin", ROUTE_ADMIN, ROUTE_PAGE, pages_admin, SCOPE_ADMIN_USERS},
	/* Public here: a scraper's token is not an API token; the handler checks
	 * the role and the scope. */
	{"GET", "/metrics", ROUTE_PUBLIC, ROUTE_API, scrape_metrics, SCOPE_METRICS},
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
	int64_t expired_at = http_identity(req)->token_expired_at;
	char when[21];

	if (expired_at) {
		api_time(expired_at, when);
		http_reply_error(req, MHD_HTTP_UNAUTHORIZED, "unauthorized",
				 "this API token expired at %s; create a new one", when);
		return;
	}
	if (kind == ROUTE_API || !http_method_is(req, "GET")) {
		http_reply_error(req, MHD_HTTP_UNAUTHORIZED, "unauthorized",
				 "log in or send an API token");
		return;
	}
	/* the query too: /open?repo=&path= must survive the login */
	auth_redirect_login(req, http_raw_uri(req));
}

static void reply_forbidden(struct http_request *req, enum route_kind kind, const char *code,
			    const char *message)
{
	if (kind == ROUTE_PAGE && http_method_is(req, "GET"))
		static_serve_html(req, MHD_HTTP_FORBIDDEN, "403.html");
	else
		http_reply_error(req, MHD_HTTP_FORBIDDEN, code, "%s", message);
}

/* The one place a route's scope is checked. A cookie session holds every
 * scope of its role, so only a token can lack one; a route that declares
 * none is refused to every token. True when the request may go on. */
static bool scope_ok(struct http_request *req, const struct route *r)
{
	const struct auth_identity *ident = http_identity(req);
	const char *name = scope_name(r->scope);

	if (ident->kind != AUTH_TOKEN || (r->scope && (ident->scopes & r->scope) == r->scope))
		return true;
	if (name)
		http_reply_error(req, MHD_HTTP_FORBIDDEN, "insufficient_scope",
				 "this API token lacks the scope \"%s\" that %s %s needs", name,
				 http_method(req), r->pattern);
	else
		http_reply_error(req, MHD_HTTP_FORBIDDEN, "insufficient_scope",
				 "%s %s takes no API token", http_method(req), r->pattern);
	return false;
}

/* A change starts only with room to finish, its audit entry included: on a
 * full state disk it is refused whole here, not failed half-way
 * (docs/operations.md, "A full state disk"). Reads go on. */
static bool room_ok(struct http_request *req)
{
	if (!http_is_state_changing(req) || db_room(http_app(req)->db) == 0)
		return true;
	http_reply_disk_full(req);
	return false;
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
		return room_ok(req);
	if (ident->kind == AUTH_NONE) {
		reply_unauthenticated(req, r->kind);
		return false;
	}
	if (r->access == ROUTE_ADMIN && ident->user.role != USER_ROLE_ADMIN) {
		reply_forbidden(req, r->kind, "forbidden", "this needs an administrator");
		return false;
	}
	if (!scope_ok(req, r))
		return false;
	if (http_is_state_changing(req) && ident->kind == AUTH_COOKIE && !auth_csrf_ok(req)) {
		reply_forbidden(req, r->kind, "csrf_failed",
				"missing or wrong CSRF token (send X-CSRF-Token)");
		return false;
	}
	return room_ok(req);
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

/* Handlers that block for tens of ms or more: they hash a password (scrypt),
 * or may call the identity provider. They run off the worker thread
 * (http_run_detached), so that the worker's other connections, kept-alive
 * ones included, do not wait behind them. */
static bool blocks(const struct route *r)
{
	static void (*const slow[])(struct http_request *req) = {
		api_login,	  pages_login_post, api_me_password,  api_tokens_create,
		api_users_create, api_users_import, pages_oidc_login, pages_oidc_callback,
		pages_oidc_logout,
	};

	for (size_t i = 0; i < sizeof(slow) / sizeof(slow[0]); i++)
		if (r->handler == slow[i])
			return true;
	return false;
}

static void log_request(struct http_request *req)
{
	log_debug("%s %s %s -> %u", http_address(req), http_method(req), http_path(req),
		  http_status(req));
}

static void run_logged(struct http_request *req)
{
	http_match(req)->route->handler(req);
	log_request(req);
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
	if (!gate(req, match->route))
		log_request(req);
	else if (blocks(match->route))
		http_run_detached(req, run_logged);
	else
		run_logged(req);
}

static const char *access_name(enum route_access a)
{
	return a == ROUTE_PUBLIC ? "public" : a == ROUTE_ADMIN ? "admin" : "user";
}

int routes_print(FILE *out)
{
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		const char *scope = scope_name(routes[i].scope);
		if (fprintf(out, "%s %s %s %s %s\n", routes[i].method, routes[i].pattern,
			    access_name(routes[i].access), routes[i].kind == ROUTE_API ? "api" : "page",
			    scope ? scope : "-") < 0)
			return 1;
	}
	return fflush(out) == 0 ? 0 : 1;
}
