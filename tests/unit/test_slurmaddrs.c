/* test_slurmaddrs.c - the peer addresses of jobs on several nodes (backend/slurmaddrs.h):
 * runs handed out lowest first, never twice, taken back after a restart, freed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backend/slurmaddrs.h"

#define A(x) ((10u << 24) | (1u << 16) | (x)) /* 10.1.0.x */

static struct slurmaddrs a;

static void test_range(void **state)
{
	char text[SLURMADDRS_TEXT_MAX];
	uint32_t first;
	(void)state;

	assert_int_equal(slurmaddrs_init(&a, ""), 0);
	assert_int_equal(slurmaddrs_take(&a, 1, 2, &first), -EINVAL); /* no range */
	assert_int_equal(slurmaddrs_init(&a, "10.1.0.192/29"), 0);
	assert_int_equal(a.count, 6); /* .193 to .198: not the network's, not broadcast */
	slurmaddrs_text(a.first, text);
	assert_string_equal(text, "10.1.0.193");
	assert_int_equal(slurmaddrs_init(&a, "10.1.0.0/16"), -EINVAL); /* above a /20 */
	assert_int_equal(slurmaddrs_init(&a, "nonsense"), -EINVAL);
}

static void test_take_and_release(void **state)
{
	uint32_t f1, f2, f3;
	(void)state;

	assert_int_equal(slurmaddrs_init(&a, "10.1.0.192/29"), 0);
	assert_int_equal(slurmaddrs_take(&a, 7, 2, &f1), 0);
	assert_int_equal(f1, A(193));
	assert_int_equal(slurmaddrs_take(&a, 8, 3, &f2), 0);
	assert_int_equal(f2, A(195));
	/* one left: a run of two does not fit, however often asked */
	assert_int_equal(slurmaddrs_take(&a, 9, 2, &f3), -ENOSPC);
	assert_int_equal(slurmaddrs_take(&a, 9, 7, &f3), -EINVAL);
	assert_int_equal(slurmaddrs_take(&a, 9, 0, &f3), -EINVAL);
	slurmaddrs_release(&a, 7);
	assert_int_equal(slurmaddrs_take(&a, 9, 2, &f3), 0);
	assert_int_equal(f3, A(193)); /* 7's run, free again */
	/* a gap of one between runs is not a run of two */
	slurmaddrs_release(&a, 9);
	assert_int_equal(slurmaddrs_take(&a, 10, 1, &f3), 0);
	assert_int_equal(slurmaddrs_take(&a, 11, 2, &f3), -ENOSPC);
	assert_int_equal(slurmaddrs_take(&a, 11, 1, &f3), 0);
	assert_int_equal(f3, A(194));
}

static void test_mark_after_restart(void **state)
{
	uint32_t f;
	(void)state;

	assert_int_equal(slurmaddrs_init(&a, "10.1.0.192/29"), 0);
	/* adopted pools take their runs back first */
	assert_int_equal(slurmaddrs_mark(&a, 3, A(194), 2), 0);
	assert_int_equal(slurmaddrs_mark(&a, 3, A(194), 2), 0); /* again: the same */
	assert_int_equal(slurmaddrs_mark(&a, 4, A(195), 2), -EBUSY);
	assert_int_equal(slurmaddrs_mark(&a, 4, A(198), 2), -ERANGE); /* past the end */
	assert_int_equal(slurmaddrs_mark(&a, 4, A(100), 1), -ERANGE); /* below it */
	assert_int_equal(slurmaddrs_take(&a, 5, 2, &f), 0);
	assert_int_equal(f, A(196)); /* .193 alone is no run of two */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_range),
		cmocka_unit_test(test_take_and_release),
		cmocka_unit_test(test_mark_after_restart),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
