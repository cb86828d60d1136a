/* Unit tests: route matching, parameters, 405 Allow lists. */
#include "unit.h"

#include "http/router.h"

static void h(struct http_request *req) { (void)req; }

static const struct route table[] = {
	{"GET", "/api/v1/users", ROUTE_ADMIN, ROUTE_API, h, 0},
	{"POST", "/api/v1/users", ROUTE_ADMIN, ROUTE_API, h, 0},
	{"GET", "/api/v1/users/{}", ROUTE_ADMIN, ROUTE_API, h, 0},
	{"PATCH", "/api/v1/users/{}", ROUTE_ADMIN, ROUTE_API, h, 0},
	{"DELETE", "/api/v1/users/{}", ROUTE_ADMIN, ROUTE_API, h, 0},
	{"GET", "/a/{}/b/{}", ROUTE_USER, ROUTE_API, h, 0},
};
#define N (sizeof(table) / sizeof(table[0]))

static void test_exact_and_params(void **state)
{
	struct route_match m;
	(void)state;
	assert_int_equal(router_match(table, N, "GET", "/api/v1/users", &m), 0);
	assert_ptr_equal(m.route, &table[0]);
	assert_int_equal(m.nparams, 0);
	assert_int_equal(router_match(table, N, "PATCH", "/api/v1/users/alice", &m), 0);
	assert_ptr_equal(m.route, &table[3]);
	assert_int_equal(m.nparams, 1);
	assert_string_equal(m.params[0], "alice");
	assert_int_equal(router_match(table, N, "GET", "/a/x1/b/y2", &m), 0);
	assert_string_equal(m.params[0], "x1");
	assert_string_equal(m.params[1], "y2");
}

static void test_no_partial_matches(void **state)
{
	struct route_match m;
	(void)state;
	assert_int_equal(router_match(table, N, "GET", "/api/v1/users/", &m), -1);
	assert_string_equal(m.allow, "");
	assert_int_equal(router_match(table, N, "GET", "/api/v1/users/a/b", &m), -1);
	assert_int_equal(router_match(table, N, "GET", "/api/v1/usersx", &m), -1);
	assert_int_equal(router_match(table, N, "GET", "/api/v1/user", &m), -1);
	assert_int_equal(router_match(table, N, "GET", "/a//b/c", &m), -1);
	assert_string_equal(m.allow, "");
}

static void test_method_not_allowed_lists_allow(void **state)
{
	struct route_match m;
	(void)state;
	assert_int_equal(router_match(table, N, "PUT", "/api/v1/users", &m), -1);
	assert_string_equal(m.allow, "GET, POST");
	assert_int_equal(router_match(table, N, "POST", "/api/v1/users/bob", &m), -1);
	assert_string_equal(m.allow, "GET, PATCH, DELETE");
}

static void test_long_segment_never_matches(void **state)
{
	char path[400];
	struct route_match m;
	(void)state;
	snprintf(path, sizeof(path), "/api/v1/users/");
	memset(path + strlen(path), 'a', 200);
	path[14 + 200] = '\0';
	assert_int_equal(router_match(table, N, "GET", path, &m), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_and_params),
		cmocka_unit_test(test_no_partial_matches),
		cmocka_unit_test(test_method_not_allowed_lists_allow),
		cmocka_unit_test(test_long_segment_never_matches),
	};
	return cmocka_run_group_tests_name("router", tests, NULL, NULL);
}
