/* Unit tests: the GPU device id (common/gpudev.c). */
#include "unit.h"

#include <errno.h>
#include <string.h>

#include "labd/gpudev.h"

static unsigned parsed(const char *text)
{
	unsigned id = 12345;

	assert_int_equal(gpudev_parse(text, &id), 0);
	return id;
}

static void test_text_round_trips(void **state)
{
	const char *texts[] = {"0", "3", "255", "0/gi1/ci0", "7/gi14/ci7", "2/share0", "1/share3"};
	char out[GPUDEV_TEXT_MAX];
	(void)state;
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		gpudev_format(parsed(texts[i]), out, sizeof(out));
		assert_string_equal(out, texts[i]);
	}
}

static void test_whole_card_is_its_minor(void **state)
{
	(void)state;
	assert_int_equal(parsed("5"), 5); /* rows written before devices had kinds stay valid */
	assert_int_equal(gpudev_minor(parsed("5/gi2/ci1")), 5);
	assert_int_equal(gpudev_minor(parsed("6/share1")), 6);
}

static void test_bad_text_is_refused(void **state)
{
	const char *bad[] = {"", "x", "256", "-1", "1/gi", "1/gi32/ci0", "1/gi1/ci8", "1/gi1",
			     "1/share256", "1/share", "1/share1x", "1 ", "0001", "1/gi1/ci0/"};
	unsigned id;
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(gpudev_parse(bad[i], &id), -EINVAL);
	assert_int_equal(gpudev_parse(NULL, &id), -EINVAL);
}

static void test_invalid_ids_do_not_decode(void **state)
{
	struct gpudev d;
	char out[GPUDEV_TEXT_MAX];
	(void)state;
	assert_false(gpudev_decode(256, &d));
	assert_false(gpudev_decode(0x30000, &d));
	gpudev_format(0x30000, out, sizeof(out));
	assert_string_equal(out, "?");
}

static void test_conflicts(void **state)
{
	(void)state;
	assert_true(gpudev_conflict(parsed("0"), parsed("0")));
	assert_true(gpudev_conflict(parsed("0"), parsed("0/gi1/ci0")));
	assert_true(gpudev_conflict(parsed("0/share1"), parsed("0")));
	assert_false(gpudev_conflict(parsed("0/gi1/ci0"), parsed("0/gi2/ci0")));
	assert_false(gpudev_conflict(parsed("0/share0"), parsed("0/share1")));
	assert_false(gpudev_conflict(parsed("0"), parsed("1")));
	assert_false(gpudev_conflict(parsed("0"), parsed("1/gi1/ci0")));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text_round_trips),
		cmocka_unit_test(test_whole_card_is_its_minor),
		cmocka_unit_test(test_bad_text_is_refused),
		cmocka_unit_test(test_invalid_ids_do_not_decode),
		cmocka_unit_test(test_conflicts),
	};
	return cmocka_run_group_tests_name("gpudev", tests, NULL, NULL);
}
