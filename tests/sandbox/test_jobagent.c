/* test_jobagent.c - labd-jobagent and its protocol (sandbox/jobagent.h).
 *
 * The protocol cases (parse, format, partial and malformed input) run anywhere.  The
 * live cases start the real static agent ($(BUILD)/libexec/labd, bound read-only at
 * /opt/labd/libexec as job pools do) in real sandboxes, as root under
 * tests/security/run.sh: two jobs in a row where the second sees nothing of the first,
 * term, the failure file, start errors, EOF; and the agent in an image root that has
 * no libc at all. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <libgen.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include <jansson.h>
#include <stdbool.h>

#include "boxsh.h"
#include "sandbox/jobagent.h"

#define USER_ID 13
#define HOST_UID (200000 + USER_ID)

/* ---- protocol ---- */

static void test_format_parse_roundtrip(void **st)
{
	char *argv[] = {"python3", "-c", "print('a,b\\n:c')\n", NULL};
	char *envp[] = {"FOO=bar", "EMPTY=", NULL};
	struct jobagent_cmd c;
	size_t len;
	char *buf;

	(void)st;
	assert_non_null(buf = jobagent_format_run("work dir", argv, envp, &len));
	assert_int_equal(strlen(buf), len);
	assert_int_equal(strncmp(buf, "run 3 2 8:work dir,7:python3,2:-c,", 34), 0);
	/* every prefix asks for more; the whole is one command */
	for (size_t i = 0; i < len; i++) {
		assert_int_equal(jobagent_parse_command(buf, i, &c), 0);
	}
	assert_int_equal(jobagent_parse_command(buf, len, &c), (long)len);
	assert_int_equal(c.kind, JOBAGENT_RUN);
	assert_string_equal(c.cwd, "work dir");
	assert_string_equal(c.argv[2], "print('a,b\\n:c')\n");
	assert_null(c.argv[3]);
	assert_string_equal(c.envp[1], "EMPTY=");
	assert_null(c.envp[2]);
	jobagent_cmd_free(&c);
	free(buf);
	assert_null(jobagent_format_run(NULL, (char *[]){NULL}, NULL, &len));
	assert_int_equal(jobagent_parse_command("term\nrun", 8, &c), 5);
	assert_int_equal(c.kind, JOBAGENT_TERM);
}

static void test_parse_malformed(void **st)
{
	static const char *const bad[] = {
		"kill\n", "run 0 0 0:,\n", "run 1 0 0:,1:x;\n", "run 1 0 0:,1:x,X",
		"run 1 1 0:,1:x,3:FOO,\n", /* env without '=' */
		"run 1 1 0:,1:x,4:=FOO,\n", "run x 0 ", "run 1 0 0:,2:a\0,\n", "run 99999 0 ",
		"run 1 0 1234567890:",
	};
	struct jobagent_cmd c;

	(void)st;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t len = i == 7 ? 16 : strlen(bad[i]);
		assert_int_equal(jobagent_parse_command(bad[i], len, &c), -1);
	}
}

static void test_status_lines(void **st)
{
	struct jobagent_status s;
	char buf[64];

	(void)st;
	assert_int_equal(jobagent_parse_status("ready\n", 6, &s), 0);
	assert_int_equal(s.kind, JOBAGENT_READY);
	assert_int_equal(jobagent_parse_status("started 42\n", 11, &s), 0);
	assert_int_equal(s.kind, JOBAGENT_STARTED);
	assert_int_equal(s.pid, 42);
	assert_int_equal(jobagent_parse_status("exited 768 5:a b,c,\n", 20, &s), 0);
	assert_int_equal(s.kind, JOBAGENT_EXITED);
	assert_int_equal(s.wait_status, 768);
	assert_string_equal(s.text, "a b,c");
	assert_int_equal(jobagent_parse_status("error 3:bad,", 12, &s), 0);
	assert_string_equal(s.text, "bad");
	assert_int_equal(jobagent_parse_status("exited 1 4:a,\n", 14, &s), -1);
	assert_int_equal(jobagent_parse_status("started x\n", 10, &s), -1);
	assert_int_equal(jobagent_parse_status("hello\n", 6, &s), -1);
	/* control characters become spaces: one line, always */
	assert_int_equal(jobagent_netstring_text(buf, sizeof(buf), "a\nb\r\x01", 5), 8);
	assert_string_equal(buf, "5:a b  ,");
}

/* Whether s (len bytes) is UTF-8 as JSON takes it: jansson is the judge, as in
 * the supervisor's job_exited. */
static bool json_takes(const char *s, size_t len)
{
	json_t *j = json_stringn(s, len);
	bool ok = j != NULL;

	json_decref(j);
	return ok;
}

/* A cut, an overlong form, a surrogate, past U+10FFFF: each bad byte is '?', every
 * valid character kept (finding 12 of the December review: one bad byte dropped the
 * whole reason, and with it the job's end). */
static void test_utf8_clean(void **st)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
		{"ab\xe2\x82", "ab??"},          /* a 3-byte character cut after 2 */
		{"\xc0\xaf", "??"},              /* overlong '/' */
		{"\xe0\x80\xaf", "???"},         /* overlong, 3 bytes */
		{"\xf0\x80\x80\xaf", "????"},    /* overlong, 4 bytes */
		{"\xed\xa0\x80", "???"},         /* a surrogate (U+D800) */
		{"\xf4\x90\x80\x80", "????"},    /* past U+10FFFF */
		{"\xf5\x80", "??"}, {"\x80x", "?x"}, {"\xff", "?"},
	};
	char buf[64], net[128];

	(void)st;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = strlen(cases[i].in);
		memcpy(buf, cases[i].in, n + 1);
		jobagent_utf8_clean(buf, n);
		assert_string_equal(buf, cases[i].out);
		assert_true(json_takes(buf, n));
	}
	/* the netstring's own cut at JOBAGENT_TEXT_MAX splits no character into JSON */
	char big[JOBAGENT_TEXT_MAX + 3], line[JOBAGENT_TEXT_MAX + 32];
	for (size_t i = 0; i + 3 <= sizeof(big); i += 3)
		memcpy(big + i, "\xe2\x82\xac", 3);
	size_t w = jobagent_netstring_text(line, sizeof(line), big, sizeof(big));
	char *text = strchr(line, ':') + 1;
	assert_int_equal(line[w - 1], ',');
	assert_true(json_takes(text, (size_t)(line + w - 1 - text)));
	assert_int_equal(jobagent_netstring_text(net, sizeof(net), "\xe2\x82", 2), 5);
	assert_string_equal(net, "2:??,");
}

/* ---- the agent in a sandbox ---- */

struct agent_box {
	struct sandbox_handle h;
	int in, status, log;
	char log_buf[8192];
	size_t log_len;
};

static char libexec[1024], state[512], outdir[700];

static void find_libexec(void)
{
	char exe[1024];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	assert_true(n > 0);
	exe[n] = '\0';
	/* <build>/tests/sandbox/test_jobagent -> <build>/libexec/labd */
	snprintf(libexec, sizeof(libexec), "%s/libexec/labd", dirname(dirname(dirname(exe))));
}

static int agent_start(struct agent_box *b, struct sandbox_spec *s)
{
	static char *argv[] = {JOBAGENT_PATH, NULL};
	int in[2], out[2], err[2], rc;

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	assert_int_equal(pipe2(err, O_CLOEXEC), 0);
	s->argv = argv;
	s->stdin_fd = in[0];
	s->stdout_fd = out[1];
	s->stderr_fd = err[1];
	s->binds[s->n_binds++] = (struct sandbox_bind){libexec, "/opt/labd/libexec", true};
	rc = sandbox_start_err(s, &b->h, NULL);
	close(in[0]);
	close(out[1]);
	close(err[1]);
	b->in = in[1];
	b->status = out[0];
	b->log = err[0];
	b->log_len = 0;
	b->log_buf[0] = '\0';
	return rc;
}

/* One status line (10 s at most: a hung agent fails the test, never hangs it). */
static void next_status(struct agent_box *b, struct jobagent_status *st)
{
	char line[2048];
	size_t n = 0;

	while (n < sizeof(line) - 1) {
		struct pollfd p = {b->status, POLLIN, 0};
		assert_int_equal(poll(&p, 1, 10000), 1);
		assert_int_equal(read(b->status, line + n, 1), 1);
		if (line[n++] == '\n')
			break;
	}
	assert_int_equal(jobagent_parse_status(line, n, st), 0);
}

/* Reads the job log until it holds want (10 s at most). */
static void log_until(struct agent_box *b, const char *want)
{
	while (!strstr(b->log_buf, want)) {
		struct pollfd p = {b->log, POLLIN, 0};
		ssize_t n;
		assert_int_equal(poll(&p, 1, 10000), 1);
		n = read(b->log, b->log_buf + b->log_len, sizeof(b->log_buf) - 1 - b->log_len);
		assert_true(n > 0);
		b->log_len += (size_t)n;
		b->log_buf[b->log_len] = '\0';
	}
}

static void send_run(struct agent_box *b, const char *cwd, char *const argv[], char *const envp[])
{
	size_t len;
	char *cmd = jobagent_format_run(cwd, argv, envp, &len);

	assert_non_null(cmd);
	assert_int_equal(write(b->in, cmd, len), (ssize_t)len);
	free(cmd);
}

/* Runs a shell line as a job; the exited status it ends with into *st. */
static void run_job(struct agent_box *b, const char *line, char *const envp[], struct jobagent_status *st)
{
	char *argv[] = {"/bin/sh", "-c", (char *)line, NULL};

	send_run(b, "", argv, envp);
	next_status(b, st);
	assert_int_equal(st->kind, JOBAGENT_STARTED);
	next_status(b, st);
	assert_int_equal(st->kind, JOBAGENT_EXITED);
}

static void agent_stop(struct agent_box *b, int want_code)
{
	struct sandbox_result res;

	close(b->in); /* EOF: the agent ends */
	assert_int_equal(sandbox_wait(&b->h, &res), 0);
	assert_int_equal(res.kind, SANDBOX_EXITED);
	assert_int_equal(res.code, want_code);
	assert_int_equal(sandbox_destroy(&b->h), 0);
	close(b->status);
	close(b->log);
}

static int live_setup(void **st)
{
	(void)st;
	if (!boxsh_can_start())
		return 0;
	find_libexec();
	snprintf(state, sizeof(state), "%s", getenv("SANDBOX_TEST_STATE_DIR"));
	snprintf(outdir, sizeof(outdir), "%s/agent-output", state);
	mkdir(state, 0755);
	if (mkdir(outdir, 0755) < 0 || chown(outdir, HOST_UID, HOST_UID) < 0)
		return -1;
	return 0;
}

static void agent_spec(struct sandbox_spec *s)
{
	boxsh_spec(s, "agent", USER_ID);
	s->binds[s->n_binds++] = (struct sandbox_bind){outdir, "/opt/ml/output", false};
}

/* The agent in its sandbox, /opt/ml/output bound, and its "ready" read. */
static void agent_up(struct agent_box *b)
{
	struct sandbox_spec s;
	struct jobagent_status js;

	agent_spec(&s);
	assert_int_equal(agent_start(b, &s), 0);
	next_status(b, &js);
	assert_int_equal(js.kind, JOBAGENT_READY);
}

static void test_two_jobs_nothing_survives(void **st)
{
	struct agent_box b;
	struct jobagent_status js;
	char *env[] = {"FOO=bar", "HOME=/home/agent/elsewhere", NULL};

	(void)st;
	if (!boxsh_can_start())
		skip();
	agent_up(&b);
	/* job 1 leaves a background child and a daemon (own session, reparented) */
	run_job(&b, "sleep 1000 & echo $! > /opt/ml/output/pid1; (setsid sleep 999 &); "
		    "echo one-out; echo one-err >&2; exit 3", NULL, &js);
	assert_true(WIFEXITED(js.wait_status));
	assert_int_equal(WEXITSTATUS(js.wait_status), 3);
	assert_string_equal(js.text, "");
	log_until(&b, "one-out\none-err\n");
	/* job 2: no process of job 1, the run's env over the agent's */
	run_job(&b, "if grep -s sleep /proc/[0-9]*/comm || kill -0 $(cat /opt/ml/output/pid1); "
		    "then exit 1; fi; echo two $FOO $HOME $USER", env, &js);
	assert_int_equal(js.wait_status, 0);
	log_until(&b, "two bar /home/agent/elsewhere agent\n");
	agent_stop(&b, 0);
}

static void test_term_failure_and_errors(void **st)
{
	struct agent_box b;
	struct jobagent_status js;
	char *nocmd[] = {"/no/such", NULL}, *t[] = {"true", NULL};
	char *trap[] = {"/bin/sh", "-c", "trap 'echo got-term; exit 7' TERM; echo up; "
					 "while :; do sleep 0.05; done", NULL};
	struct timespec gap = {0, 50 * 1000 * 1000};

	(void)st;
	if (!boxsh_can_start())
		skip();
	agent_up(&b);
	send_run(&b, "", nocmd, NULL);
	next_status(&b, &js);
	assert_int_equal(js.kind, JOBAGENT_ERROR);
	assert_string_equal(js.text, "exec /no/such: No such file or directory");
	/* a command of 400 three-byte characters: "exec <it>: ..." is cut mid-character
	 * at JOBAGENT_TEXT_MAX, and still reaches the supervisor as UTF-8 */
	char euros[1201], *mb[] = {euros, NULL};
	for (size_t i = 0; i < 1200; i += 3)
		memcpy(euros + i, "\xe2\x82\xac", 3);
	euros[1200] = '\0';
	send_run(&b, "", mb, NULL);
	next_status(&b, &js);
	assert_int_equal(js.kind, JOBAGENT_ERROR);
	assert_int_equal(strncmp(js.text, "exec \xe2\x82\xac", 8), 0);
	assert_true(json_takes(js.text, strlen(js.text)));
	send_run(&b, "/no/dir", t, NULL);
	next_status(&b, &js);
	assert_int_equal(js.kind, JOBAGENT_ERROR);
	assert_string_equal(js.text, "working directory /no/dir: No such file or directory");
	/* term: the job's trap runs */
	send_run(&b, "", trap, NULL);
	next_status(&b, &js);
	assert_int_equal(js.kind, JOBAGENT_STARTED);
	log_until(&b, "up\n");
	/* a second run while one runs is refused, the first goes on */
	send_run(&b, "", t, NULL);
	next_status(&b, &js);
	assert_int_equal(js.kind, JOBAGENT_ERROR);
	assert_string_equal(js.text, "a job is running");
	assert_int_equal(write(b.in, "term\n", 5), 5);
	next_status(&b, &js);
	assert_int_equal(js.kind, JOBAGENT_EXITED);
	assert_int_equal(WEXITSTATUS(js.wait_status), 7);
	log_until(&b, "got-term\n");
	/* the failure file, made one line */
	run_job(&b, "printf 'bad learning rate\\nsee log' > /opt/ml/output/failure; exit 1", NULL, &js);
	assert_int_equal(WEXITSTATUS(js.wait_status), 1);
	assert_string_equal(js.text, "bad learning rate see log");
	/* the next job did not write it: an old file is not its failure */
	nanosleep(&gap, NULL); /* past the coarse clock's tick */
	run_job(&b, "exit 2", NULL, &js);
	assert_int_equal(WEXITSTATUS(js.wait_status), 2);
	assert_string_equal(js.text, "");
	/* a signal is a signal */
	run_job(&b, "kill -KILL $$", NULL, &js);
	assert_true(WIFSIGNALED(js.wait_status));
	assert_int_equal(WTERMSIG(js.wait_status), SIGKILL);
	agent_stop(&b, 0);
}

/* The copy instructions of a job on several hosts (LABD_SHARE, sandbox/jobshare.h)
 * never reach the command; one the agent cannot follow fails the job with the
 * reason, as the job's failure and in its log. */
static void test_share_instructions(void **st)
{
	struct agent_box b;
	struct jobagent_status js;
	char *none[] = {"LABD_SHARE=none", "LABD_SHARE_DIRS=", NULL};
	char *bad[] = {"LABD_SHARE=bogus", "LABD_SHARE_DIRS=/opt/ml/output\n", NULL};

	(void)st;
	if (!boxsh_can_start())
		skip();
	agent_up(&b);
	run_job(&b, "env | grep -c LABD_SHARE; echo checked", none, &js);
	log_until(&b, "0\nchecked\n");
	assert_int_equal(js.wait_status, 0);
	run_job(&b, "echo must-not-run", bad, &js);
	assert_true(WIFEXITED(js.wait_status));
	assert_int_equal(WEXITSTATUS(js.wait_status), 1);
	assert_string_equal(js.text, "LABD_SHARE: malformed");
	log_until(&b, "labd: LABD_SHARE: malformed\n");
	assert_null(strstr(b.log_buf, "must-not-run"));
	agent_stop(&b, 0);
}

/* An image with nothing but mount points: the static agent runs there, bound under
 * the image's hidden /opt.  (Its only possible job would be the agent itself, whose
 * kill(-1) at the end would reach the outer agent too: a start error is enough.) */
static void test_agent_in_bare_image(void **st)
{
	static const char *const dirs[] = {"", "/proc", "/sys", "/dev", "/tmp", "/run", "/home", "/opt", "/etc"};
	char *sh[] = {"/bin/sh", "-c", "true", NULL};
	struct sandbox_spec s;
	struct agent_box b;
	struct jobagent_status js;
	char img[700], d[800];

	(void)st;
	if (!boxsh_can_start())
		skip();
	snprintf(img, sizeof(img), "%s/bare-image", state);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(d, sizeof(d), "%s%s", img, dirs[i]);
		assert_int_equal(mkdir(d, 0755), 0);
	}
	boxsh_spec(&s, "agent", USER_ID);
	s.image = img;
	assert_int_equal(agent_start(&b, &s), 0);
	next_status(&b, &js);
	assert_int_equal(js.kind, JOBAGENT_READY);
	send_run(&b, "/", sh, NULL);
	next_status(&b, &js);
	assert_int_equal(js.kind, JOBAGENT_ERROR);
	assert_string_equal(js.text, "exec /bin/sh: No such file or directory");
	agent_stop(&b, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format_parse_roundtrip),
		cmocka_unit_test(test_parse_malformed),
		cmocka_unit_test(test_status_lines),
		cmocka_unit_test(test_utf8_clean),
		cmocka_unit_test(test_two_jobs_nothing_survives),
		cmocka_unit_test(test_term_failure_and_errors),
		cmocka_unit_test(test_share_instructions),
		cmocka_unit_test(test_agent_in_bare_image),
	};
	return cmocka_run_group_tests(tests, live_setup, NULL);
}
