/* Unit tests: how a job ended, in the API's words (jobs/outcome.c). */
#include "unit.h"

#include <string.h>

#include "jobs/jobs.h"

struct seen {
	enum job_status status;
	enum job_secondary secondary;
	int exit_code;
	char reason[JOB_REASON_MAX];
	bool failure_set;
};

static struct seen outcome(enum job_status now, const char *kind, int code, int sig,
			   const char *failure, bool home_full)
{
	struct job j = {.status = now, .max_runtime_s = 90};
	struct backend_job_exit x = {.kind = kind, .code = code, .signal = sig, .reason = "",
				     .failure = failure, .home_full = home_full};
	struct job_move m = {0};
	struct seen s;

	memset(&s, 0, sizeof(s));
	jobs_outcome(&j, &x, 512LL << 20, &m, s.reason, sizeof(s.reason));
	s.status = m.status;
	s.secondary = m.secondary;
	s.exit_code = m.exit_code;
	s.failure_set = m.failure != NULL;
	assert_ptr_equal(m.message, s.reason);
	return s;
}

static void test_each_end_said_plainly(void **state)
{
	struct seen s;
	(void)state;

	s = outcome(JOB_IN_PROGRESS, "exited", 0, 0, "", false);
	assert_int_equal(s.status, JOB_COMPLETED);
	assert_int_equal(s.exit_code, 0);
	assert_false(s.failure_set);

	s = outcome(JOB_IN_PROGRESS, "exited", 3, 0, "", false);
	assert_int_equal(s.status, JOB_FAILED);
	assert_int_equal(s.secondary, JOB_S_FAILED);
	assert_int_equal(s.exit_code, 3);
	assert_string_equal(s.reason, "exit code 3");
	assert_true(s.failure_set);

	s = outcome(JOB_IN_PROGRESS, "exited", 1, 0, "ValueError: bad shape", false);
	assert_string_equal(s.reason, "ValueError: bad shape (exit code 1)");

	s = outcome(JOB_IN_PROGRESS, "exited", 1, 0, "", true);
	assert_string_equal(s.reason, "no space left in the home (exit code 1)");

	s = outcome(JOB_IN_PROGRESS, "signaled", 0, 9, "", false);
	assert_string_equal(s.reason, "killed by signal 9");
	assert_int_equal(s.exit_code, -1);

	/* the supervisor's words when it knows more: the job killed its own agent */
	struct job j = {.status = JOB_IN_PROGRESS};
	struct backend_job_exit x = {.kind = "signaled", .signal = 9, .failure = "",
				     .reason = "the job killed its job agent (signal 9)"};
	struct job_move m = {0};
	jobs_outcome(&j, &x, 0, &m, s.reason, sizeof(s.reason));
	assert_int_equal(m.status, JOB_FAILED);
	assert_string_equal(s.reason, "the job killed its job agent (signal 9)");

	s = outcome(JOB_IN_PROGRESS, "oom", 0, 9, "", false);
	assert_string_equal(s.reason, "out of memory (the memory limit is 512 MiB)");

	s = outcome(JOB_IN_PROGRESS, "max_runtime", 0, 15, "", false);
	assert_int_equal(s.status, JOB_STOPPED);
	assert_int_equal(s.secondary, JOB_MAX_RUNTIME_EXCEEDED);
	assert_string_equal(s.reason, "ran past its max_runtime_s of 90 s");
	assert_false(s.failure_set);

	s = outcome(JOB_IN_PROGRESS, "stopped", 0, 15, "", false);
	assert_int_equal(s.status, JOB_STOPPED);
	assert_int_equal(s.secondary, JOB_S_STOPPED);

	/* a job being stopped ends Stopped, however its command ended */
	s = outcome(JOB_STOPPING, "exited", 0, 0, "", false);
	assert_int_equal(s.status, JOB_STOPPED);
	s = outcome(JOB_STOPPING, "signaled", 0, 9, "", false);
	assert_int_equal(s.secondary, JOB_S_STOPPED);
}

static void test_staging_failure_names_the_path(void **state)
{
	struct job j = {.status = JOB_IN_PROGRESS};
	struct backend_job_exit x = {.kind = "stage_failed", .reason = "input channel data/x: no such folder",
				     .failure = ""};
	struct job_move m = {0};
	char reason[JOB_REASON_MAX];
	(void)state;

	jobs_outcome(&j, &x, 0, &m, reason, sizeof(reason));
	assert_int_equal(m.status, JOB_FAILED);
	assert_string_equal(reason, "input channel data/x: no such folder");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_each_end_said_plainly),
		cmocka_unit_test(test_staging_failure_names_the_path),
	};
	return cmocka_run_group_tests_name("jobs_outcome", tests, NULL, NULL);
}
