/* Unit tests: the job agent's line protocol as the supervisor speaks it
 * (server/supervisor/agentio.c): run formatting, each status line, partial
 * input, and what a hostile agent could send. */
#include "unit.h"

#include "supervisor/agentio.h"

static void test_format_run(void **state)
{
	char *argv[] = {"python3", "a b\nc", NULL}, *envp[] = {"K=V", NULL}, *out;
	size_t len;
	(void)state;
	assert_int_equal(agentio_format_run(argv, envp, "/home/u/p", &out, &len), 0);
	assert_string_equal(out, "run 2 7:python3 5:a b\nc 1 3:K=V 9:/home/u/p\n");
	assert_int_equal(len, strlen(out));
	free(out);
	char *none[] = {NULL};
	assert_int_equal(agentio_format_run(argv, none, "", &out, &len), 0);
	assert_string_equal(out, "run 2 7:python3 5:a b\nc 0 0:\n");
	free(out);
}

static void test_parse(void **state)
{
	struct agent_status st;
	const char *two = "ready\nstarted 42\n";
	(void)state;
	assert_int_equal(agentio_parse(two, strlen(two), &st), 6);
	assert_int_equal(st.said, AGENT_READY);
	assert_int_equal(agentio_parse(two + 6, strlen(two) - 6, &st), 11);
	assert_int_equal(st.said, AGENT_STARTED);
	assert_int_equal(st.pid, 42);
	const char *ex = "exited 256 5:oh\nno\n";
	assert_int_equal(agentio_parse(ex, strlen(ex), &st), (int)strlen(ex));
	assert_int_equal(st.said, AGENT_EXITED);
	assert_int_equal(st.status, 256);
	assert_int_equal(st.failure_len, 5);
	assert_string_equal(st.failure, "oh\nno");
	/* every prefix asks for more, never a wrong answer */
	for (size_t n = 0; n < strlen(ex); n++)
		assert_int_equal(agentio_parse(ex, n, &st), 0);
	assert_int_equal(agentio_parse("start", 5, &st), 0);
}

static void test_hostile(void **state)
{
	static const char *const bad[] = {
		"started 0\n", "started -1\n", "started 99999999999\n", "started 12x\n",
		"exited 70000 0:\n", "exited 0 2000:", "exited 0 1:ab\n", "exited x 0:\n",
		"readyy\n", "hello\n",
	};
	struct agent_status st;
	char longline[4096];
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (agentio_parse(bad[i], strlen(bad[i]), &st) != -1 || st.said != AGENT_BAD)
			fail_msg("accepted %s", bad[i]);
	}
	memset(longline, 'a', sizeof(longline));
	assert_int_equal(agentio_parse(longline, sizeof(longline), &st), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format_run),
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_hostile),
	};
	return cmocka_run_group_tests_name("agentio", tests, NULL, NULL);
}
