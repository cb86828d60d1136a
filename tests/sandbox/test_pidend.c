/* test_pidend.c - sandbox_end_pids on a live sandbox: of three host pids named (a
 * process inside, a process of the host outside it, the sandbox's init), only the one
 * inside is SIGKILLed and counted; the outside one and the init live on. What root does
 * for gpu_processes_end (a share over its GPU memory budget). Needs root
 * (tests/security/run.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/wait.h>

#include "boxsh.h"

static char out[4096];

/* The host pid of a descendant of pid whose comm is name, or 0. */
static pid_t find_below(pid_t pid, const char *name)
{
	char path[64], comm[32], buf[512];
	FILE *f;
	pid_t found = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	for (char *save = NULL, *t = strtok_r(buf, " \n", &save); t && !found;
	     t = strtok_r(NULL, " \n", &save)) {
		pid_t k = (pid_t)strtol(t, NULL, 10);
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)k);
		if ((f = fopen(path, "r"))) {
			if (fgets(comm, sizeof(comm), f) && strncmp(comm, name, strlen(name)) == 0)
				found = k;
			fclose(f);
		}
		if (!found)
			found = find_below(k, name);
	}
	return found;
}

/* Whether pid is gone or a zombie (SIGKILLed, not reaped yet). */
static bool dead(pid_t pid)
{
	char path[64], buf[256];
	FILE *f;
	bool gone = true;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "r"))) {
		const char *p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
		gone = p && (p[2] == 'Z' || p[2] == 'X');
		fclose(f);
	}
	return gone;
}

static void test_only_the_sandboxes_own_pid_is_ended(void **st)
{
	struct sandbox_spec s;
	struct boxsh b;
	pid_t inside = 0, outside;

	(void)st;
	if (!boxsh_can_start())
		skip();
	boxsh_spec(&s, "pidend", 13);
	assert_int_equal(boxsh_start(&b, &s), 0);
	assert_int_equal(boxsh_run(&b, "sleep 300 & echo started", out, sizeof(out)), 0);
	for (int i = 0; i < 200 && !(inside = find_below(b.h.pid, "sleep")); i++)
		usleep(10000); /* the shell has forked it; its exec may still be under way */
	assert_true(inside > 0);
	outside = fork();
	assert_true(outside >= 0);
	if (outside == 0) {
		pause();
		_exit(0);
	}
	const pid_t pids[] = {outside, inside, b.h.pid, 1};
	assert_int_equal(sandbox_end_pids(&b.h, pids, 4), 1);
	for (int i = 0; i < 200 && !dead(inside); i++)
		usleep(10000);
	assert_true(dead(inside));
	assert_false(dead(outside));
	assert_false(dead(b.h.pid));
	assert_int_equal(boxsh_run(&b, "echo alive", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "alive"));
	kill(outside, SIGKILL);
	waitpid(outside, NULL, 0);
	boxsh_stop(&b);
	/* gone: nothing of it to end */
	assert_int_equal(sandbox_end_pids(&b.h, pids, 1), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_only_the_sandboxes_own_pid_is_ended),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
