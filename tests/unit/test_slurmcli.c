/* Unit tests: the Slurm backend's parsers and tables (backend/slurmcli.h) on lines
 * Slurm 22.05 printed (research notes §2), the verdicts (unknown vs gone), the end
 * causes, the submission's argv, and the tool runner with a real child (a shell
 * script standing in for squeue) that answers, fails or hangs. */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/slurmcli.h"
#include "labd/clock.h"

static void test_names(void **state)
{
	bool pool;
	int64_t id;
	char name[40];
	(void)state;

	assert_int_equal(slurmcli_name_parse("labd-rt-42", &pool, &id), 0);
	assert_false(pool);
	assert_int_equal(id, 42);
	assert_int_equal(slurmcli_name_parse("labd-pool-7", &pool, &id), 0);
	assert_true(pool);
	assert_int_equal(id, 7);
	static const char *const bad[] = {"labd-rt-", "labd-rt-0", "labd-rt-07", "labd-rt--1",
					  "labd-rt-1x", "labd-rt-99999999999999999999",
					  "labd-job-1", "wrap", "", "labd-pool-+3"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(slurmcli_name_parse(bad[i], &pool, &id), -EINVAL);
	slurmcli_name(true, 12, name, sizeof(name));
	assert_string_equal(name, "labd-pool-12");
	slurmcli_name(false, 3, name, sizeof(name));
	assert_string_equal(name, "labd-rt-3");
}

static void test_squeue_lines(void **state)
{
	struct slurm_job j;
	struct tm tm = {.tm_year = 126, .tm_mon = 11, .tm_mday = 4, .tm_hour = 23, .tm_min = 10,
			.tm_isdst = -1};
	(void)state;

	/* pending behind busy GPUs, with Slurm's start estimate */
	assert_int_equal(slurmcli_parse_squeue_line(
				 "14|labd-rt-5|PENDING|Resources|n/a|2026-12-04T23:10:00|alice|\n", &j),
			 0);
	assert_int_equal(j.job_id, 14);
	assert_false(j.pool);
	assert_int_equal(j.id, 5);
	assert_string_equal(j.state, "PENDING");
	assert_string_equal(j.reason, "Resources");
	assert_string_equal(j.host, "");
	assert_string_equal(j.user, "alice");
	assert_int_equal(j.start_at, (int64_t)mktime(&tm));
	/* running on a node; the host is the batch host */
	assert_int_equal(slurmcli_parse_squeue_line(
				 "9|labd-pool-3|RUNNING|None|n2|2026-12-04T22:00:01|bob|n2", &j), 0);
	assert_true(j.pool);
	assert_string_equal(j.host, "n2");
	assert_string_equal(j.nodes, "n2");
	assert_int_equal(j.peer_n, 0);
	/* a job on several nodes: its node list, and its hosts' peer addresses */
	assert_int_equal(slurmcli_parse_squeue_line("9|labd-pool-3|RUNNING|None|n1|N/A|"
						    "bob:10.1.0.193:2|n[1-2]", &j), 0);
	assert_string_equal(j.user, "bob");
	assert_string_equal(j.nodes, "n[1-2]");
	assert_int_equal(j.peer_first, (10u << 24) | (1u << 16) | 193u);
	assert_int_equal(j.peer_n, 2);
	static const char *const bad_peers[] = {"bob:10.1.0.193", "bob:10.1.0.193:0",
						"bob:10.1.0.193:65", "bob:10.1.0:2", "bob:x:2",
						"bob:10.1.0.193:2x"};
	for (size_t i = 0; i < sizeof(bad_peers) / sizeof(bad_peers[0]); i++) {
		char line[128];
		snprintf(line, sizeof(line), "9|labd-pool-3|RUNNING|None|n1|N/A|%s|n[1-2]",
			 bad_peers[i]);
		assert_int_equal(slurmcli_parse_squeue_line(line, &j), -EINVAL);
	}
	/* no estimate, no comment */
	assert_int_equal(slurmcli_parse_squeue_line("2|labd-rt-1|PENDING|Priority|n/a|N/A|(null)|",
						    &j), 0);
	assert_int_equal(j.start_at, 0);
	assert_string_equal(j.user, "");
	/* a reason that is a sentence is cut, not refused (22.05 prints these) */
	assert_int_equal(slurmcli_parse_squeue_line(
				 "5|labd-rt-3|PENDING|Nodes required for job are DOWN, DRAINED or "
				 "reserved for jobs in higher priority partitions|n/a|N/A||", &j), 0);
	assert_int_equal(strncmp(j.reason, "Nodes required for job are DOWN", 31), 0);
	/* not labd's: some other job of the same account */
	assert_int_equal(slurmcli_parse_squeue_line("3|wrap|RUNNING|None|vm|N/A||vm", &j), 1);
	/* malformed: a '|' in a name, fields missing, a bad id, a bad time, a bad user */
	assert_int_equal(slurmcli_parse_squeue_line("3|labd-rt-1|x|RUNNING|None|vm|N/A|", &j),
			 -EINVAL);
	assert_int_equal(slurmcli_parse_squeue_line("3|labd-rt-1|RUNNING", &j), -EINVAL);
	assert_int_equal(slurmcli_parse_squeue_line("x|labd-rt-1|RUNNING|None|vm|N/A||vm", &j),
			 -EINVAL);
	assert_int_equal(slurmcli_parse_squeue_line("3|labd-rt-1|RUNNING|None|vm|soon||vm", &j),
			 -EINVAL);
	assert_int_equal(slurmcli_parse_squeue_line("3|labd-rt-1|RUNNING|None|vm|N/A|Ev il|vm", &j),
			 -EINVAL);
	assert_int_equal(slurmcli_parse_squeue_line("3|labd-rt-1||None|vm|N/A|a|vm", &j), -EINVAL);
}

static void test_sbatch_output(void **state)
{
	int64_t id;
	(void)state;

	assert_int_equal(slurmcli_parse_sbatch("11\n", &id), 0);
	assert_int_equal(id, 11);
	assert_int_equal(slurmcli_parse_sbatch("12;labdtest\n", &id), 0);
	assert_int_equal(id, 12);
	assert_int_equal(slurmcli_parse_sbatch("", &id), -EINVAL);
	assert_int_equal(slurmcli_parse_sbatch("12;\n", &id), -EINVAL);
	assert_int_equal(slurmcli_parse_sbatch("Submitted batch job 12\n", &id), -EINVAL);
	assert_int_equal(slurmcli_parse_sbatch("12\n13\n", &id), -EINVAL);
}

/* `scontrol show job -d -o` of 22.05 (one line; shortened where it does not matter) */
#define SHOW_JOB                                                                                   \
	"JobId=2 JobName=labd-rt-5 UserId=labd(999) GroupId=labd(999) Priority=4294901759 "      \
	"JobState=RUNNING Reason=None Dependency=(null) ExitCode=0:0 BatchHost=vm "             \
	"NumNodes=1 NumCPUs=1 TRES=cpu=1,mem=200M,node=1,billing=1 Socks/Node=* "                \
	"JOB_GRES=gpu:%s Nodes=vm CPU_IDs=0 Mem=200 GRES=%s "                                    \
	"MinCPUsNode=1 Features=(null) TresPerNode=gres:gpu:%s\n"

static void expect_idx(const char *count, const char *gres, const unsigned *want, size_t nwant)
{
	char line[1024];
	unsigned idx[8];
	size_t n = 99;

	snprintf(line, sizeof(line), SHOW_JOB, count, gres, count);
	assert_int_equal(slurmcli_parse_gres_idx(line, idx, 8, &n), 0);
	assert_int_equal(n, nwant);
	for (size_t i = 0; i < nwant; i++)
		assert_int_equal(idx[i], want[i]);
}

static void test_gres_idx(void **state)
{
	unsigned idx[8];
	size_t n;
	(void)state;

	expect_idx("1", "gpu:1(IDX:1)", (unsigned[]){1}, 1);
	expect_idx("2", "gpu:2(IDX:0-1)", (unsigned[]){0, 1}, 2);
	expect_idx("3", "gpu:tesla:3(IDX:0,2-3)", (unsigned[]){0, 2, 3}, 3);
	expect_idx("0", "gpu:0(IDX:N/A)", NULL, 0);
	/* a job without GPUs: no GRES= at all */
	assert_int_equal(slurmcli_parse_gres_idx("JobId=3 JobState=RUNNING Nodes=vm CPU_IDs=0 "
						 "Mem=200 MinCPUsNode=1", idx, 8, &n), 0);
	assert_int_equal(n, 0);
	/* more indices than room, and nonsense inside IDX */
	assert_int_equal(slurmcli_parse_gres_idx(" GRES=gpu:9(IDX:0-8)", idx, 8, &n), -EINVAL);
	assert_int_equal(slurmcli_parse_gres_idx(" GRES=gpu:1(IDX:x)", idx, 8, &n), -EINVAL);
	assert_int_equal(slurmcli_parse_gres_idx(" GRES=gpu:1(IDX:3-1)", idx, 8, &n), -EINVAL);
	assert_int_equal(slurmcli_parse_gres_idx(" GRES=gpu:1(IDX:1", idx, 8, &n), -EINVAL);
}

static void test_verdicts(void **state)
{
	(void)state;
	assert_int_equal(slurmcli_classify(0, false, ""), SLURM_ANSWERED);
	assert_int_equal(slurmcli_classify(-1, true, ""), SLURM_UNKNOWN);
	/* the controller stopped / dead (observed, after ~20 s) */
	assert_int_equal(slurmcli_classify(1, false, "slurm_load_jobs error: Socket timed out on "
						     "send/recv operation"), SLURM_UNKNOWN);
	assert_int_equal(slurmcli_classify(1, false, "slurm_load_jobs error: Unable to contact "
						     "slurm controller (connect failure)"),
			 SLURM_UNKNOWN);
	/* purged job: gone, with the same exit status */
	assert_int_equal(slurmcli_classify(1, false, "slurm_load_jobs error: Invalid job id "
						     "specified"), SLURM_GONE);
	assert_int_equal(slurmcli_classify(1, false, "sbatch: error: Batch job submission failed: "
						     "Requested node configuration is not available"),
			 SLURM_REFUSED);
}

static void expect_end(const char *state, bool ours, const char *cause, bool failed,
		       const char *reason)
{
	struct slurm_end e;

	slurmcli_end(state, "None", "n1", ours, &e);
	assert_string_equal(e.cause, cause);
	assert_int_equal(e.failed, failed);
	assert_string_equal(e.reason, reason);
}

static void test_ends_and_phases(void **state)
{
	char text[SLURM_TEXT_MAX];
	(void)state;

	expect_end("TIMEOUT", false, "time_limit", false,
		   "Slurm's time limit for the allocation passed");
	expect_end("OUT_OF_MEMORY", false, "oom", true, "Slurm ended the allocation: out of memory");
	expect_end("PREEMPTED", false, "gone", true, "preempted in Slurm");
	expect_end("NODE_FAIL", false, "gone", true, "the node n1 failed");
	expect_end("BOOT_FAIL", false, "gone", true, "the node n1 failed to boot");
	expect_end("CANCELLED", false, "requested", false, "cancelled in Slurm");
	expect_end("CANCELLED", true, "requested", false, "stopped");
	expect_end("FAILED", false, "start_failed", true, "Slurm could not run the allocation");
	expect_end("COMPLETED", false, "time_limit", false, "the Slurm allocation ran out");
	expect_end("SPECIAL_EXIT", false, "gone", true, "Slurm ended the allocation (SPECIAL_EXIT)");

	assert_int_equal(slurmcli_phase("PENDING"), SLURM_PHASE_PENDING);
	assert_int_equal(slurmcli_phase("CONFIGURING"), SLURM_PHASE_PENDING);
	assert_int_equal(slurmcli_phase("RUNNING"), SLURM_PHASE_RUNNING);
	assert_int_equal(slurmcli_phase("COMPLETING"), SLURM_PHASE_ENDING);
	assert_int_equal(slurmcli_phase("NODE_FAIL"), SLURM_PHASE_ENDED);
	assert_int_equal(slurmcli_phase("CANCELLED"), SLURM_PHASE_ENDED);

	slurmcli_pending_text("Resources", text, sizeof(text));
	assert_string_equal(text, "waiting in Slurm for free resources");
	slurmcli_pending_text("Priority", text, sizeof(text));
	assert_string_equal(text, "waiting in Slurm behind jobs of higher priority");
	slurmcli_pending_text("BeginTime", text, sizeof(text));
	assert_string_equal(text, "waiting in Slurm (BeginTime)");
}

static void test_submit_argv(void **state)
{
	const char *argv[SLURMCLI_SUBMIT_ARGS];
	char store[SLURMCLI_SUBMIT_STORE], joined[1024] = "";
	size_t used = 0;
	struct slurm_submit s = {.pool = false, .id = 5, .user = "alice", .memory_mb = 2048,
				 .cpus = 2, .gpus = 1, .seconds = 3601, .partition = "gpu"};
	(void)state;

	slurmcli_submit_argv("/usr/bin/sbatch", &s, argv, store);
	for (size_t i = 0; argv[i]; i++)
		used += (size_t)snprintf(joined + used, sizeof(joined) - used, "%s ", argv[i]);
	assert_string_equal(joined, "/usr/bin/sbatch --parsable --job-name=labd-rt-5 "
				    "--comment=alice --mem=2048M --cpus-per-task=2 --gres=gpu:1 "
				    "--time=61 --nodes=1 --ntasks=1 --no-requeue "
				    "--output=/dev/null --chdir=/ --partition=gpu --wrap "
				    "exec sleep 3601 ");
	/* no GPUs, Slurm's default partition */
	s.gpus = 0;
	s.partition = "";
	s.pool = true;
	slurmcli_submit_argv("sbatch", &s, argv, store);
	for (size_t i = 0; argv[i]; i++) {
		assert_null(strstr(argv[i], "--gres"));
		assert_null(strstr(argv[i], "--partition"));
	}
	assert_string_equal(argv[2], "--job-name=labd-pool-5");
	/* on several nodes the comment names the hosts' peer addresses */
	s.nodes = 2;
	s.peer_first = (10u << 24) | (1u << 16) | 193u;
	s.peer_n = 2;
	slurmcli_submit_argv("sbatch", &s, argv, store);
	assert_string_equal(argv[3], "--comment=alice:10.1.0.193:2");
}

/* A stand-in tool: a script in a temporary folder. */
static void write_tool(const char *path, const char *body)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fprintf(f, "#!/bin/sh\n%s\n", body);
	fclose(f);
	assert_int_equal(chmod(path, 0755), 0);
}

static void test_runner_and_queue(void **state)
{
	char dir[] = "/tmp/test_slurmcli.XXXXXX", tool[256], out[256], err[256];
	struct slurm_tools t = {.timeout_ms = 3000};
	struct slurm_job *jobs;
	size_t n;
	int status;
	long long t0;
	(void)state;

	assert_non_null(mkdtemp(dir));
	snprintf(tool, sizeof(tool), "%s/squeue", dir);
	t.squeue = t.scancel = t.scontrol = t.sbatch = tool;
	/* an answer: two of labd's jobs among another one */
	write_tool(tool, "echo '4|labd-rt-2|RUNNING|None|n1|2026-12-04T22:00:00|alice|n1'\n"
			 "echo '5|wrap|RUNNING|None|n1|N/A||n1'\n"
			 "echo '6|labd-pool-9|PENDING|Priority|n/a|N/A|bob|'");
	assert_int_equal(slurmcli_queue(&t, &jobs, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(jobs[0].job_id, 4);
	assert_string_equal(jobs[1].user, "bob");
	free(jobs);
	/* a line of labd's that is not understood: unknown, never "gone" */
	write_tool(tool, "echo '4|labd-rt-2|RUNNING|None|n1|soon|alice|n1'");
	assert_int_equal(slurmcli_queue(&t, &jobs, &n), -EAGAIN);
	/* the controller away: unknown, never "no jobs" */
	write_tool(tool, "echo 'squeue: error: Unable to contact slurm controller (connect "
			 "failure)' >&2; exit 1");
	assert_int_equal(slurmcli_queue(&t, &jobs, &n), -EAGAIN);
	assert_int_equal(n, 0);
	/* scancel of a purged job is done */
	write_tool(tool, "echo 'scancel: error: Kill job error on job id 5: Invalid job id "
			 "specified' >&2; exit 1");
	assert_int_equal(slurmcli_cancel(&t, 5), 0);
	/* a tool that hangs is killed at the timeout, with what it started */
	write_tool(tool, "sleep 30 & sleep 30");
	t.timeout_ms = 300;
	t0 = clock_ms();
	assert_int_equal(slurmcli_queue(&t, &jobs, &n), -EAGAIN);
	assert_true(clock_ms() - t0 < 2000);
	const char *argv[] = {tool, NULL};
	assert_int_equal(slurmcli_run(argv, 300, out, sizeof(out), err, sizeof(err), &status),
			 -ETIMEDOUT);
	assert_int_equal(status, -1);
	/* sbatch refused: the why, and -EINVAL */
	write_tool(tool, "echo 'sbatch: error: Batch job submission failed: Requested node "
			 "configuration is not available' >&2; exit 1");
	t.timeout_ms = 3000;
	struct slurm_submit s = {.id = 1, .user = "a", .memory_mb = 1, .cpus = 1, .seconds = 60};
	int64_t id;
	assert_int_equal(slurmcli_submit(&t, &s, &id, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "Requested node configuration is not available");
	write_tool(tool, "echo '77;labdtest'");
	assert_int_equal(slurmcli_submit(&t, &s, &id, err, sizeof(err)), 0);
	assert_int_equal(id, 77);
	/* a missing tool */
	unlink(tool);
	assert_int_equal(slurmcli_queue(&t, &jobs, &n), -EIO);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_squeue_lines),
		cmocka_unit_test(test_sbatch_output),
		cmocka_unit_test(test_gres_idx),
		cmocka_unit_test(test_verdicts),
		cmocka_unit_test(test_ends_and_phases),
		cmocka_unit_test(test_submit_argv),
		cmocka_unit_test(test_runner_and_queue),
	};
	return cmocka_run_group_tests_name("slurmcli", tests, NULL, NULL);
}
