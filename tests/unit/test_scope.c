/* Unit tests: token scope names, role sets, the stored text form. */
#include "unit.h"

#include "auth/scope.h"

static void test_names_round_trip(void **state)
{
	(void)state;
	for (unsigned bit = 1; bit <= SCOPE_ADMIN_JOBS; bit <<= 1) {
		const char *name = scope_name(bit);
		assert_non_null(name);
		assert_int_equal(scope_parse(name), bit);
	}
	assert_null(scope_name(0));
	assert_null(scope_name(SCOPE_TOKENS | SCOPE_RUNTIMES));
	assert_int_equal(scope_parse("admin"), 0);
	assert_int_equal(scope_parse("read:usage "), 0);
	assert_int_equal(scope_parse(""), 0);
}

static void test_roles(void **state)
{
	unsigned user = scope_of_role(USER_ROLE_USER), admin = scope_of_role(USER_ROLE_ADMIN);
	(void)state;
	assert_true(user & SCOPE_READ_USAGE);
	assert_false(user & (SCOPE_ADMIN_USERS | SCOPE_ADMIN_QUOTA | SCOPE_ADMIN_USAGE |
			     SCOPE_ADMIN_RUNTIMES | SCOPE_ADMIN_AUDIT | SCOPE_METRICS |
			     SCOPE_ADMIN_JOBS));
	assert_int_equal(admin & user, user);
	assert_true(admin & SCOPE_METRICS);
	/* a user's jobs scope never reaches other users' jobs; an admin's needs this one */
	assert_true(admin & SCOPE_ADMIN_JOBS);
	assert_string_equal(scope_name(SCOPE_ADMIN_JOBS), "admin:jobs");
}

static void test_list_parse_and_format(void **state)
{
	char text[SCOPE_TEXT_MAX];
	(void)state;
	assert_int_equal(scope_parse_list("read:usage  runtimes", USER_ROLE_USER),
			 SCOPE_READ_USAGE | SCOPE_RUNTIMES);
	/* a name this release does not know grants nothing */
	assert_int_equal(scope_parse_list("gone:scope read:quota", USER_ROLE_USER), SCOPE_READ_QUOTA);
	assert_int_equal(scope_parse_list("*", USER_ROLE_USER), scope_of_role(USER_ROLE_USER));
	assert_int_equal(scope_parse_list("*", USER_ROLE_ADMIN), scope_of_role(USER_ROLE_ADMIN));
	assert_int_equal(scope_parse_list("", USER_ROLE_ADMIN), 0);
	scope_format(SCOPE_IDENTIFY | SCOPE_METRICS, text, sizeof(text));
	assert_string_equal(text, "identify metrics");
	scope_format(scope_of_role(USER_ROLE_ADMIN), text, sizeof(text));
	assert_int_equal(scope_parse_list(text, USER_ROLE_USER), scope_of_role(USER_ROLE_ADMIN));
	scope_format(0, text, sizeof(text));
	assert_string_equal(text, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_round_trip),
		cmocka_unit_test(test_roles),
		cmocka_unit_test(test_list_parse_and_format),
	};
	return cmocka_run_group_tests_name("scope", tests, NULL, NULL);
}
