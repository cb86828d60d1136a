/* Unit tests: the job agent's protocol as the supervisor speaks it
 * (server/supervisor/agentio.c over sandbox/jobagent.h): a run command the
 * agent's own parser reads back, each status line, partial input, and what a
 * hostile agent could send. */
#include "unit.h"

#include <jansson.h>

#include "sandbox/jobagent.h"
#include "supervisor/agentio.h"

static void test_format_run(void **state)
{
	char *argv[] = {"python3", "a b\nc", NULL}, *envp[] = {"K=V", NULL}, *out;
	struct jobagent_cmd cmd;
	size_t len;
	(void)state;
	assert_int_equal(agentio_format_run(argv, envp, "/home/u/p", &out, &len), 0);
	assert_int_equal(jobagent_parse_command(out, len, &cmd), (long)len);
	assert_int_equal(cmd.kind, JOBAGENT_RUN);
	assert_string_equal(cmd.cwd, "/home/u/p");
	assert_string_equal(cmd.argv[1], "a b\nc");
	assert_null(cmd.argv[2]);
	assert_string_equal(cmd.envp[0], "K=V");
	jobagent_cmd_free(&cmd);
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
	const char *ex = "exited 256 5:oh no,\n";
	assert_int_equal(agentio_parse(ex, strlen(ex), &st), (int)strlen(ex));
	assert_int_equal(st.said, AGENT_EXITED);
	assert_int_equal(st.status, 256);
	assert_string_equal(st.failure, "oh no");
	const char *er = "error 9:no python,\n";
	assert_int_equal(agentio_parse(er, strlen(er), &st), (int)strlen(er));
	assert_int_equal(st.said, AGENT_ERROR);
	assert_string_equal(st.failure, "no python");
	/* every prefix asks for more, never a wrong answer */
	for (size_t n = 0; n < strlen(ex); n++)
		assert_int_equal(agentio_parse(ex, n, &st), 0);
}

/* The agent runs as the user: a text that is not UTF-8 (here a character cut
 * and a surrogate) is cleaned on arrival, so job_exited's JSON keeps it. */
static void test_text_made_utf8(void **state)
{
	const char *ex = "exited 256 8:ok \xe2\x82\xed\xa0\x80,\n";
	struct agent_status st;
	json_t *j;
	(void)state;
	assert_int_equal(agentio_parse(ex, strlen(ex), &st), (int)strlen(ex));
	assert_string_equal(st.failure, "ok ?????");
	assert_non_null(j = json_string(st.failure));
	json_decref(j);
}

static void test_hostile(void **state)
{
	static const char *const bad[] = {
		"started 0\n", "started -1\n", "started 99999999999\n", "started 12x\n",
		"exited 70000 0:,\n", "exited 0 2000:,\n", "exited x 0:,\n", "readyy\n", "hello\n",
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
		cmocka_unit_test(test_text_made_utf8),
		cmocka_unit_test(test_hostile),
	};
	return cmocka_run_group_tests_name("agentio", tests, NULL, NULL);
}
