/* Unit tests: the bounded string copy and the UTF-8 cut (common/str.c). */
#include "unit.h"

#include <errno.h>
#include <string.h>

#include "labd/str.h"

static void test_fits(void **state)
{
	char out[8];
	(void)state;
	memset(out, 'x', sizeof(out));
	assert_int_equal(str_copy(out, sizeof(out), "abc"), 3);
	assert_string_equal(out, "abc");
	assert_int_equal(str_copy(out, sizeof(out), ""), 0);
	assert_string_equal(out, "");
}

static void test_exactly_fills(void **state)
{
	char out[4];
	(void)state;
	assert_int_equal(str_copy(out, sizeof(out), "abc"), 3); /* three bytes and the NUL */
	assert_string_equal(out, "abc");
}

static void test_one_over_is_cut_and_said(void **state)
{
	char out[4];
	(void)state;
	memset(out, 'x', sizeof(out));
	assert_int_equal(str_copy(out, sizeof(out), "abcd"), -ENAMETOOLONG);
	assert_string_equal(out, "abc"); /* cut, still terminated */
	assert_int_equal(str_copy(out, sizeof(out), "a much longer string"), -ENAMETOOLONG);
	assert_string_equal(out, "a m");
}

static void test_no_room_at_all(void **state)
{
	char out[1] = {'x'};
	(void)state;
	assert_int_equal(str_copy(out, 0, "abc"), -ENAMETOOLONG);
	assert_int_equal(out[0], 'x'); /* nothing written */
	assert_int_equal(str_copy(out, 1, "abc"), -ENAMETOOLONG);
	assert_int_equal(out[0], '\0');
}

/* A cut never splits a character: "é" is two bytes, "€" three. */
static void test_utf8_cut_on_a_boundary(void **state)
{
	(void)state;
	assert_int_equal(str_utf8_len("abc", 10), 3);
	assert_int_equal(str_utf8_len("abc", 3), 3);
	assert_int_equal(str_utf8_len("abcd", 3), 3);
	assert_int_equal(str_utf8_len("a\xc3\xa9", 2), 1);     /* not half of é */
	assert_int_equal(str_utf8_len("a\xc3\xa9", 3), 3);
	assert_int_equal(str_utf8_len("\xe2\x82\xac!", 2), 0); /* not two thirds of € */
	assert_int_equal(str_utf8_len("\xe2\x82\xac!", 3), 3);
	assert_int_equal(str_utf8_len("", 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fits),
		cmocka_unit_test(test_exactly_fills),
		cmocka_unit_test(test_one_over_is_cut_and_said),
		cmocka_unit_test(test_no_room_at_all),
		cmocka_unit_test(test_utf8_cut_on_a_boundary),
	};
	return cmocka_run_group_tests_name("str", tests, NULL, NULL);
}
