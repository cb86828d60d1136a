/* Unit tests: the bounded buffer (common/buf.c). */
#include "unit.h"

#include <errno.h>

#include "labd/buf.h"

static void test_empty(void **state)
{
	struct buf b;
	(void)state;
	buf_init(&b, 16);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	assert_string_equal(buf_str(&b), "");
	buf_release(&b); /* nothing allocated: still fine */
	assert_int_equal(b.max_bytes, 16);
}

static void test_limit_exactly_reached(void **state)
{
	struct buf b;
	(void)state;
	buf_init(&b, 8);
	assert_int_equal(buf_add(&b, "abcd", 4), 0);
	assert_int_equal(buf_add(&b, "efgh", 4), 0);
	assert_int_equal(b.len, 8);
	assert_string_equal(b.data, "abcdefgh");
	assert_true(b.alloc <= 9); /* never more than the maximum and its NUL */
	assert_int_equal(buf_add(&b, "", 0), 0);
	buf_release(&b);
}

static void test_one_past_fails_intact(void **state)
{
	struct buf b;
	(void)state;
	buf_init(&b, 8);
	assert_int_equal(buf_add(&b, "abcdefg", 7), 0);
	assert_int_equal(buf_add(&b, "xy", 2), -EMSGSIZE);
	assert_int_equal(b.len, 7);
	assert_string_equal(b.data, "abcdefg");
	assert_int_equal(buf_addf(&b, "%d", 42), -EMSGSIZE);
	assert_string_equal(b.data, "abcdefg");
	assert_int_equal(buf_add(&b, "z", 1), 0); /* still usable up to the limit */
	assert_string_equal(b.data, "abcdefgz");
	assert_int_equal(buf_add(&b, "!", 1), -EMSGSIZE);
	buf_release(&b);

	buf_init(&b, 0);
	assert_int_equal(buf_add(&b, "a", 1), -EMSGSIZE);
	assert_null(b.data);
	buf_release(&b);
}

static void test_growth_and_addf(void **state)
{
	struct buf b;
	char chunk[1000];
	(void)state;
	memset(chunk, 'x', sizeof(chunk));
	buf_init(&b, 100000);
	for (int i = 0; i < 100; i++)
		assert_int_equal(buf_add(&b, chunk, sizeof(chunk)), 0);
	assert_int_equal(b.len, 100000);
	assert_int_equal(b.data[b.len], '\0');
	assert_true(b.alloc <= 100001);
	assert_int_equal(buf_add(&b, "x", 1), -EMSGSIZE);
	buf_clear(&b);
	assert_int_equal(buf_addf(&b, "%s: %d\r\n", "Content-Length", 12), 0);
	assert_string_equal(buf_str(&b), "Content-Length: 12\r\n");
	buf_release(&b);
}

static void test_clear_and_release(void **state)
{
	struct buf b;
	(void)state;
	buf_init(&b, 64);
	assert_int_equal(buf_add(&b, "hello", 5), 0);
	char *kept = b.data;
	buf_clear(&b);
	assert_int_equal(b.len, 0);
	assert_string_equal(buf_str(&b), "");
	assert_ptr_equal(b.data, kept); /* clear keeps the memory */
	assert_int_equal(buf_add(&b, "again", 5), 0);
	assert_string_equal(b.data, "again");
	buf_release(&b);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.alloc, 0);
	assert_int_equal(b.max_bytes, 64); /* released, reusable with the same limit */
	assert_int_equal(buf_add(&b, "more", 4), 0);
	buf_release(&b);
}

static void test_drop_front(void **state)
{
	struct buf b;
	(void)state;
	buf_init(&b, 8);
	assert_int_equal(buf_add(&b, "abcdefgh", 8), 0);
	assert_int_equal(buf_add(&b, "i", 1), -EMSGSIZE);
	buf_drop(&b, 3);
	assert_string_equal(buf_str(&b), "defgh");
	/* dropped bytes make room again, never more than the maximum */
	assert_int_equal(buf_add(&b, "ijk", 3), 0);
	assert_string_equal(buf_str(&b), "defghijk");
	assert_int_equal(buf_add(&b, "l", 1), -EMSGSIZE);
	assert_true(b.alloc <= 9);
	buf_drop(&b, 100);
	assert_int_equal(b.len, 0);
	assert_string_equal(buf_str(&b), "");
	buf_drop(&b, 1); /* empty: nothing happens */
	buf_release(&b);
	buf_drop(&b, 1); /* never allocated */
	assert_null(b.data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_limit_exactly_reached),
		cmocka_unit_test(test_one_past_fails_intact),
		cmocka_unit_test(test_growth_and_addf),
		cmocka_unit_test(test_clear_and_release),
		cmocka_unit_test(test_drop_front),
	};
	return cmocka_run_group_tests_name("buf", tests, NULL, NULL);
}
