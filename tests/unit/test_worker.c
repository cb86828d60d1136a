/* Unit tests: forked root workers (server/supervisor/worker.c) and their time
 * limit. A worker blocked for ever (here in the open of a FIFO nobody writes,
 * as an upload once was on a user's planted log.txt) is killed at its limit,
 * its result reads as -ETIMEDOUT, and once reaped nothing of it is left with
 * the parent: no descriptor, no slot. */
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "labd/clock.h"
#include "supervisor/worker.h"

static char fifo[128];

static int open_fifo(void *arg, int fd)
{
	int ok = 1;
	(void)arg;
	int f = open(fifo, O_WRONLY); /* no reader: blocks */
	if (f >= 0)
		close(f);
	return worker_send(fd, &ok, sizeof(ok), -1) < 0;
}

static int answer(void *arg, int fd)
{
	int ok = *(int *)arg;
	return worker_send(fd, &ok, sizeof(ok), -1) < 0;
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* opendir's own */
}

/* Polls fd until readable, as the supervisor's loop does, calling worker_tick. */
static void loop_until_readable(int fd, int max_ms)
{
	long long until = clock_ms() + max_ms;
	struct pollfd p = {.fd = fd, .events = POLLIN};

	while (clock_ms() < until) {
		long long t = worker_tick(clock_ms());
		if (poll(&p, 1, t >= 0 && t < 50 ? (int)t : 50) > 0)
			return;
	}
	fail_msg("worker socket never became readable");
}

static void reap(pid_t pid)
{
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	worker_reaped(pid);
}

static void test_blocked_worker_is_killed_at_its_limit(void **state)
{
	char dir[64];
	int before, fd, ok = 0, passed;
	pid_t pid;
	(void)state;
	unit_tempdir(dir);
	snprintf(fifo, sizeof(fifo), "%s/log.txt", dir);
	assert_int_equal(mkfifo(fifo, 0644), 0);
	before = open_fds();

	long long t0 = clock_ms();
	assert_int_equal(worker_spawn(open_fifo, NULL, 300, &pid, &fd), 0);
	loop_until_readable(fd, 5000);
	long long took = clock_ms() - t0;
	assert_true(took >= 290 && took < 3000);
	/* the supervisor's loop may reap it (SIGCHLD) before it reads the socket */
	reap(pid);
	assert_int_equal(worker_recv(fd, &ok, sizeof(ok), &passed), -ETIMEDOUT);
	assert_int_equal(passed, -1);
	close(fd);
	assert_int_equal(open_fds(), before);
	assert_int_equal(worker_tick(clock_ms()), -1); /* nothing left to time */
	unit_rmdir(dir);
}

static void test_answering_worker_is_not_killed(void **state)
{
	int fd, ok = 0, v = 7, passed;
	pid_t pid;
	(void)state;
	assert_int_equal(worker_spawn(answer, &v, 5000, &pid, &fd), 0);
	loop_until_readable(fd, 5000);
	assert_int_equal(worker_recv(fd, &ok, sizeof(ok), &passed), (ssize_t)sizeof(ok));
	assert_int_equal(ok, 7);
	close(fd);
	reap(pid);
	assert_int_equal(worker_tick(clock_ms()), -1);
}

/* worker_end: its owner let go (a job cleared while its upload ran). */
static void test_end_kills_a_running_worker(void **state)
{
	char dir[64];
	int fd, st;
	pid_t pid;
	(void)state;
	unit_tempdir(dir);
	snprintf(fifo, sizeof(fifo), "%s/log.txt", dir);
	assert_int_equal(mkfifo(fifo, 0644), 0);
	assert_int_equal(worker_spawn(open_fifo, NULL, 60000, &pid, &fd), 0);
	close(fd);
	worker_end(pid);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	worker_reaped(pid);
	worker_end(pid); /* reaped: nothing (its pid may be another's by now) */
	unit_rmdir(dir);
}

/* A full table refuses; once its workers are reaped (by anyone: a waitpid of
 * someone else's too) their slots are free again. */
static void test_table_is_bounded(void **state)
{
	static pid_t pids[WORKER_MAX];
	char dir[64];
	int fd, v = 1;
	pid_t extra;
	(void)state;
	unit_tempdir(dir);
	snprintf(fifo, sizeof(fifo), "%s/log.txt", dir);
	assert_int_equal(mkfifo(fifo, 0644), 0);
	for (int i = 0; i < WORKER_MAX; i++) {
		assert_int_equal(worker_spawn(open_fifo, NULL, 60000, &pids[i], &fd), 0);
		close(fd);
	}
	assert_int_equal(worker_spawn(answer, &v, 60000, &extra, &fd), -EAGAIN);
	for (int i = 0; i < WORKER_MAX; i++) {
		worker_end(pids[i]);
		assert_int_equal(waitpid(pids[i], NULL, 0), pids[i]);
	}
	assert_int_equal(worker_spawn(answer, &v, 60000, &extra, &fd), 0);
	close(fd);
	reap(extra);
	unit_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blocked_worker_is_killed_at_its_limit),
		cmocka_unit_test(test_answering_worker_is_not_killed),
		cmocka_unit_test(test_end_kills_a_running_worker),
		cmocka_unit_test(test_table_is_bounded),
	};
	return cmocka_run_group_tests_name("worker", tests, NULL, NULL);
}
