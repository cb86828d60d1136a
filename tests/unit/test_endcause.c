/* Unit tests: why a sandbox ended (supervisor/endcause.c), the one rule of runtimes and
 * pools: the first cause stays, and a reason is cut on a UTF-8 boundary. */
#include "unit.h"

#include <stdbool.h>
#include <string.h>

#include "supervisor/endcause.h"

static void test_first_cause_stays(void **state)
{
	char cause[ENDCAUSE_CAUSE_MAX] = "", reason[ENDCAUSE_REASON_MAX] = "";
	bool failed = false;
	(void)state;

	endcause_set(cause, reason, &failed, "requested", false, "stopped by the user");
	/* the SIGKILL after the grace, an OOM in it: still the stop */
	endcause_set(cause, reason, &failed, "oom", true, "out of memory");
	endcause_set(cause, reason, &failed, "start_failed", true, "mount failed");
	assert_string_equal(cause, "requested");
	assert_string_equal(reason, "stopped by the user");
	assert_false(failed);
}

static void test_reason_cut_on_a_boundary(void **state)
{
	char cause[ENDCAUSE_CAUSE_MAX] = "", reason[ENDCAUSE_REASON_MAX] = "";
	char longer[ENDCAUSE_REASON_MAX + 8];
	bool failed = false;
	(void)state;

	/* 198 bytes of 'a', then "é" across the last byte that fits */
	memset(longer, 'a', ENDCAUSE_REASON_MAX - 2);
	snprintf(longer + ENDCAUSE_REASON_MAX - 2, 8, "\xc3\xa9zz");
	endcause_set(cause, reason, &failed, "exited", true, longer);
	assert_int_equal(strlen(reason), ENDCAUSE_REASON_MAX - 2);
	assert_true(failed);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_cause_stays),
		cmocka_unit_test(test_reason_cut_on_a_boundary),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
