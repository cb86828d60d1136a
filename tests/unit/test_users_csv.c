/* Unit tests: the user import's CSV (server/api/users_csv.c): the header,
 * RFC 4180 quoting through libcsv, row numbers in every error, the bounds. */
#include "unit.h"

#include <stdlib.h>
#include <string.h>

#include "api/users_csv.h"

static int parse(const char *text, struct users_csv *c, char *err)
{
	return users_csv_parse(text, strlen(text), c, err, 256);
}

static void test_rows_and_quoting(void **state)
{
	struct users_csv c;
	char err[256];
	(void)state;
	assert_int_equal(parse("\xef\xbb\xbfpassword,name,groups\r\n"
			       "\"p,\"\"q\"\"\",20231234,cs101;ml\r\n"
			       "\r\n"
			       " ,  j.doe ,\"a\nb\"\n",
			       &c, err),
			 0);
	assert_int_equal(c.n, 2);
	assert_true(c.has[CSV_NAME] && c.has[CSV_GROUPS] && c.has[CSV_PASSWORD]);
	assert_false(c.has[CSV_EMAIL] || c.has[CSV_PLAN]);
	assert_int_equal(c.rows[0].row, 2);
	assert_string_equal(c.rows[0].field[CSV_NAME], "20231234");
	assert_string_equal(c.rows[0].field[CSV_PASSWORD], "p,\"q\"");
	assert_string_equal(c.rows[0].field[CSV_GROUPS], "cs101;ml");
	assert_string_equal(c.rows[0].field[CSV_EMAIL], ""); /* no such column */
	assert_int_equal(c.rows[1].row, 3); /* the blank line is no row */
	assert_string_equal(c.rows[1].field[CSV_NAME], "j.doe");
	assert_string_equal(c.rows[1].field[CSV_PASSWORD], "");
	assert_string_equal(c.rows[1].field[CSV_GROUPS], "a\nb");
	users_csv_free(&c);
}

static void test_errors_name_the_row(void **state)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
		{"", "row 1: no header row"},
		{"email\nx@y\n", "row 1: the header names no \"name\" column"},
		{"name,nick\na,b\n", "row 1: unknown column \"nick\""},
		{"name,name\na,b\n", "row 1: column \"name\" named twice"},
		{"name,email\na,b\nc\n", "row 3: 1 fields, the header has 2"},
		{"name\na\nb,c\n", "row 3: more fields than the header's 1"},
		{"name\na\nb\"c\n", "row 3: malformed quoting"},
		{"name\na\n\"b\n", "row 3: malformed quoting"},
		{"name\na\x00" "b\n", "row 2, field 1:"},
	};
	struct users_csv c;
	char err[256];
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len = strlen(cases[i].text);
		if (i == sizeof(cases) / sizeof(cases[0]) - 1)
			len = 9; /* the NUL inside */
		err[0] = '\0';
		if (users_csv_parse(cases[i].text, len, &c, err, sizeof(err)) == 0)
			fail_msg("case %zu parsed", i);
		if (strncmp(err, cases[i].want, strlen(cases[i].want)) != 0)
			fail_msg("case %zu: \"%s\", want \"%s...\"", i, err, cases[i].want);
	}
}

static void test_bounds(void **state)
{
	size_t cap = 16 + (USERS_CSV_MAX_ROWS + 1) * 8;
	char *text = malloc(cap), err[256];
	struct users_csv c;
	size_t len = (size_t)snprintf(text, cap, "name\n");
	(void)state;
	for (int i = 0; i < USERS_CSV_MAX_ROWS; i++)
		len += (size_t)snprintf(text + len, cap - len, "u%d\n", i);
	assert_int_equal(users_csv_parse(text, len, &c, err, sizeof(err)), 0);
	assert_int_equal(c.n, USERS_CSV_MAX_ROWS);
	users_csv_free(&c);
	len += (size_t)snprintf(text + len, cap - len, "one-more\n");
	assert_int_equal(users_csv_parse(text, len, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "more than 5000 users"));
	assert_int_equal(users_csv_parse(text, USERS_CSV_MAX_BYTES + 1, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "larger than"));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rows_and_quoting),
		cmocka_unit_test(test_errors_name_the_row),
		cmocka_unit_test(test_bounds),
	};
	return cmocka_run_group_tests_name("users_csv", tests, NULL, NULL);
}
