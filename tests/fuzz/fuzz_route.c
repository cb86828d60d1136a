/* fuzz_route.c - the request path: the route matcher (http/router.c) with a
 * table shaped like labd's (web/routes.c), the gate's user of /user/<name>/
 * (proxy/gate.c) and the static file path check (http/static.c), with "..",
 * "%2e%2e", encoded slashes and NUL among the seeds. Input: the method on the
 * first line, the path after. */
#include "fuzz.h"
#include "http/router.h"
#include "http/static.h"
#include "labd/parse.h"
#include "proxy/gate.h"

static const struct route routes[] = {
	{"GET", "/api/v1/health", ROUTE_PUBLIC, ROUTE_API, NULL, 0},
	{"POST", "/api/v1/login", ROUTE_PUBLIC, ROUTE_API, NULL, 0},
	{"GET", "/api/v1/me", ROUTE_USER, ROUTE_API, NULL, 1},
	{"DELETE", "/api/v1/me/tokens/{}", ROUTE_USER, ROUTE_API, NULL, 1},
	{"GET", "/api/v1/jobs/{}", ROUTE_USER, ROUTE_API, NULL, 1},
	{"POST", "/api/v1/jobs/{}/stop", ROUTE_USER, ROUTE_API, NULL, 1},
	{"GET", "/api/v1/jobs/{}/logs", ROUTE_USER, ROUTE_API, NULL, 1},
	{"GET", "/api/v1/users/{}", ROUTE_ADMIN, ROUTE_API, NULL, 1},
	{"PATCH", "/api/v1/users/{}", ROUTE_ADMIN, ROUTE_API, NULL, 1},
	{"DELETE", "/api/v1/users/{}", ROUTE_ADMIN, ROUTE_API, NULL, 1},
	{"PUT", "/api/v1/groups/{}/members/{}", ROUTE_ADMIN, ROUTE_API, NULL, 1},
	{"GET", "/admin/users/{}", ROUTE_ADMIN, ROUTE_PAGE, NULL, 1},
	{"GET", "/jobs/{}", ROUTE_USER, ROUTE_PAGE, NULL, 1},
	{"GET", "/", ROUTE_PUBLIC, ROUTE_PAGE, NULL, 0},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *method = fuzz_take_line(&data, &size), *path = fuzz_cstr(data, size);
	struct route_match m;
	char user[33];

	if (router_match(routes, sizeof(routes) / sizeof(routes[0]), method, path, &m) == 0) {
		FUZZ_ASSERT(m.route && strcmp(m.route->method, method) == 0);
		FUZZ_ASSERT(m.nparams >= 0 && m.nparams <= ROUTER_MAX_PARAMS);
		for (int i = 0; i < m.nparams; i++) /* one whole segment each */
			FUZZ_ASSERT(m.params[i][0] && !strchr(m.params[i], '/') &&
				    strlen(m.params[i]) < ROUTER_PARAM_MAX);
	} else {
		FUZZ_ASSERT(!m.route && memchr(m.allow, '\0', sizeof(m.allow)));
	}
	if (gate_user(path, user, sizeof(user)) == 0)
		FUZZ_ASSERT(parse_user_name_ok(user) && !strchr(user, '/'));
	if (static_path_safe(path)) {
		FUZZ_ASSERT(path[0] != '/' && path[0] != '.' && !strstr(path, "/.") &&
			    !strstr(path, "//") && !strchr(path, '\\'));
		for (const char *p = path; *p; p++)
			FUZZ_ASSERT((unsigned char)*p >= 0x20 && *p != 0x7f);
	}
	free(method);
	free(path);
	return 0;
}
