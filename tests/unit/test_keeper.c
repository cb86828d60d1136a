/* Unit tests: the keeper (server/supervisor/keeper.c, keeperproc.c) with real
 * pipes and processes: output that survives its parent closing the read end,
 * rotation at the cap, set_log and sync ordering, fetch, exit on EOF, refusals
 * of non-root peers and of bad requests, and what the keeper holds. */
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "supervisor/keeper.h"
#include "supervisor/keeperwire.h"

struct fixture {
	char dir[64], sock[128], log[128];
	int p[2]; /* the output pipe: the test writes p[1] */
	pid_t keeper, holder; /* holder: the process whose cgroups the keeper joins */
};

static size_t slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;
	if (fd < 0) {
		buf[0] = '\0';
		return 0;
	}
	n = read(fd, buf, len - 1);
	close(fd);
	assert_true(n >= 0);
	buf[n] = '\0';
	return (size_t)n;
}

static void put(int fd, const char *s)
{
	assert_int_equal(write(fd, s, strlen(s)), (ssize_t)strlen(s));
}

/* Waits (at most 5 s) for pid to exit; its wait status, or -1 on a timeout. */
static int reap(pid_t pid)
{
	for (int i = 0; i < 500; i++) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid)
			return st;
		usleep(10000);
	}
	return -1;
}

/* A keeper on a fresh pipe; log NULL: a job pool's keeper between jobs. */
static void start(struct fixture *f, bool runtime_log, const int *held, unsigned n_held)
{
	unit_tempdir(f->dir);
	snprintf(f->sock, sizeof(f->sock), "%s/k.sock", f->dir);
	snprintf(f->log, sizeof(f->log), "%s/jupyter.log", f->dir);
	f->holder = fork(); /* before the pipe: it holds no writer */
	if (f->holder == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves nothing behind */
		pause();
		_exit(0);
	}
	assert_int_equal(pipe2(f->p, O_CLOEXEC), 0);
	struct keeper_spec ks = {.sock_path = f->sock, .cgroup_of = f->holder, .drain_fd = f->p[0],
				 .log_path = runtime_log ? f->log : NULL,
				 .log_max_bytes = 65536, .log_gid = 0, .n_held = n_held};
	for (unsigned i = 0; i < n_held; i++)
		ks.held_fds[i] = held[i];
	assert_int_equal(keeper_start(&ks, &f->keeper), 0);
	close(f->p[0]); /* the supervisor lets go: only the keeper reads now */
}

static void stop(struct fixture *f)
{
	if (f->keeper > 0) {
		keeper_stop(f->sock);
		assert_true(WIFEXITED(reap(f->keeper)));
	}
	close(f->p[1]);
	kill(f->holder, SIGKILL);
	waitpid(f->holder, NULL, 0);
	unit_rmdir(f->dir);
}

static void test_output_survives_parent(void **state)
{
	struct fixture f;
	char buf[256];
	uint64_t written = 0;
	(void)state;
	start(&f, true, NULL, 0);
	put(f.p[1], "[I] Kernel started\n"); /* no EPIPE: the keeper reads */
	assert_int_equal(keeper_sync(f.sock, &written), 0);
	assert_int_equal(written, 19);
	slurp(f.log, buf, sizeof(buf));
	assert_string_equal(buf, "[I] Kernel started\n");
	struct stat st;
	assert_int_equal(stat(f.sock, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	stop(&f);
}

/* Past the cap the log becomes jupyter.log.1 (runlog.c's rule) and a new one starts. */
static void test_rotation(void **state)
{
	struct fixture f;
	static char big[40001], buf[70000];
	char old[160];
	(void)state;
	start(&f, true, NULL, 0);
	memset(big, 'a', 40000);
	put(f.p[1], big);
	assert_int_equal(keeper_sync(f.sock, NULL), 0);
	memset(big, 'b', 40000);
	put(f.p[1], big);
	assert_int_equal(keeper_sync(f.sock, NULL), 0);
	snprintf(old, sizeof(old), "%s.1", f.log);
	assert_int_equal(slurp(old, buf, sizeof(buf)), 40000);
	assert_int_equal(buf[0], 'a');
	assert_int_equal(slurp(f.log, buf, sizeof(buf)), 40000);
	assert_int_equal(buf[39999], 'b');
	stop(&f);
}

static int open_log(struct fixture *f, const char *name)
{
	char path[160];
	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	assert_true(fd >= 0);
	return fd;
}

static void read_log(struct fixture *f, const char *name, char *buf, size_t len)
{
	char path[160];
	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	slurp(path, buf, len);
}

/* What was written before set_log goes to the previous log; sync leaves nothing behind. */
static void test_set_log_and_sync(void **state)
{
	struct fixture f;
	char buf[256];
	uint64_t written;
	int a, b, c;
	(void)state;
	start(&f, false, NULL, 0);
	put(f.p[1], "between jobs\n"); /* no log: discarded */
	a = open_log(&f, "1.log");
	assert_int_equal(keeper_set_log(f.sock, a, 1000, 0), 0);
	close(a); /* the keeper has its copy */
	put(f.p[1], "job 1 says\n");
	b = open_log(&f, "2.log");
	assert_int_equal(keeper_set_log(f.sock, b, 1000, 0), 0);
	close(b);
	read_log(&f, "1.log", buf, sizeof(buf));
	assert_string_equal(buf, "job 1 says\n");
	put(f.p[1], "job 2\n");
	assert_int_equal(keeper_sync(f.sock, &written), 0);
	assert_int_equal(written, 6);
	read_log(&f, "2.log", buf, sizeof(buf));
	assert_string_equal(buf, "job 2\n");
	/* the cap: one marker line, then nothing; written_bytes already count */
	c = open_log(&f, "3.log");
	put(c, "0123456789");
	assert_int_equal(keeper_set_log(f.sock, c, 16, 10), 0);
	close(c);
	put(f.p[1], "abcdefghij\nmore\n");
	assert_int_equal(keeper_sync(f.sock, &written), 0);
	read_log(&f, "3.log", buf, sizeof(buf));
	assert_string_equal(buf, "0123456789abcdef\n[labd: log capped at 16 bytes]\n");
	/* -1: discard from now on */
	assert_int_equal(keeper_set_log(f.sock, -1, 0, 0), 0);
	put(f.p[1], "gone\n");
	assert_int_equal(keeper_sync(f.sock, &written), 0);
	assert_int_equal(written, 0);
	read_log(&f, "3.log", buf, sizeof(buf));
	assert_null(strstr(buf, "gone"));
	stop(&f);
}

static void test_fetch(void **state)
{
	struct fixture f;
	int a[2], b[2], got[KEEPER_HELD_MAX];
	unsigned n = 9;
	char buf[16] = "";
	(void)state;
	assert_int_equal(pipe2(a, O_CLOEXEC), 0);
	assert_int_equal(pipe2(b, O_CLOEXEC), 0);
	int held[2] = {a[1], b[0]};
	start(&f, true, held, 2);
	close(a[1]);
	close(b[0]);
	assert_int_equal(keeper_fetch(f.sock, got, KEEPER_HELD_MAX, &n), 0);
	assert_int_equal(n, 2);
	assert_true(fcntl(got[0], F_GETFD) & FD_CLOEXEC);
	put(got[0], "to agent");
	assert_int_equal(read(a[0], buf, sizeof(buf)), 8);
	put(b[1], "from agent");
	assert_int_equal(read(got[1], buf, sizeof(buf)), 10);
	close(got[0]);
	close(got[1]);
	/* fewer than held: the first max of them */
	assert_int_equal(keeper_fetch(f.sock, got, 1, &n), 0);
	assert_int_equal(n, 1);
	put(got[0], "x");
	close(got[0]);
	close(a[0]);
	close(b[1]);
	stop(&f);
}

static void test_exit_on_eof(void **state)
{
	struct fixture f;
	char buf[256];
	int st;
	(void)state;
	start(&f, true, NULL, 0);
	put(f.p[1], "last words\n");
	close(f.p[1]); /* the sandbox ended: no writer left */
	st = reap(f.keeper);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	slurp(f.log, buf, sizeof(buf));
	assert_string_equal(buf, "last words\n");
	int rc = keeper_sync(f.sock, NULL);
	assert_true(rc == -ECONNREFUSED || rc == -ENOENT);
	f.keeper = 0;
	f.p[1] = open("/dev/null", O_WRONLY); /* stop() closes it */
	stop(&f);
}

/* The socket's mode keeps others out; the peer's uid does too when it is opened. */
static void test_non_root_refused(void **state)
{
	struct fixture f;
	int st;
	(void)state;
	start(&f, true, NULL, 0);
	assert_int_equal(chmod(f.dir, 0755), 0);
	assert_int_equal(chmod(f.sock, 0666), 0);
	pid_t c = fork();
	if (c == 0) {
		int fds[KEEPER_HELD_MAX];
		unsigned n;
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(2);
		int rc[3] = {keeper_sync(f.sock, NULL),
			     keeper_fetch(f.sock, fds, KEEPER_HELD_MAX, &n), keeper_stop(f.sock)};
		for (int i = 0; i < 3; i++)
			if (rc[i] != -EPERM)
				_exit(10 + i * 40 + (-rc[i] & 31)); /* which call, and its errno */
		_exit(0);
	}
	assert_int_equal(waitpid(c, &st, 0), c);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(keeper_sync(f.sock, NULL), 0); /* still there for root */
	stop(&f);
}

/* One raw message (with an fd when fd >= 0); the keeper's rc. */
static int raw(const char *sock, const void *msg, size_t len, int fd)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = (void *)msg, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct keeper_rep rp = {.rc = 1};
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	assert_int_equal(connect(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.b;
		mh.msg_controllen = sizeof(u.b);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	assert_true(sendmsg(s, &mh, 0) >= 0);
	assert_int_equal(recv(s, &rp, sizeof(rp), 0), (ssize_t)sizeof(rp));
	close(s);
	return rp.rc;
}

static void test_bad_requests(void **state)
{
	struct fixture f;
	struct keeper_req rq = {.magic = KEEPER_MAGIC, .op = KEEPER_OP_SYNC};
	char big[sizeof(rq) + 8] = {0};
	int p[2];
	(void)state;
	start(&f, true, NULL, 0);
	assert_int_equal(raw(f.sock, &rq, 4, -1), -EINVAL); /* short */
	assert_int_equal(raw(f.sock, big, sizeof(big), -1), -EINVAL); /* long */
	rq.magic = 0x12345678;
	assert_int_equal(raw(f.sock, &rq, sizeof(rq), -1), -EINVAL);
	rq.magic = KEEPER_MAGIC;
	rq.op = 99;
	assert_int_equal(raw(f.sock, &rq, sizeof(rq), -1), -EINVAL);
	rq.op = KEEPER_OP_STOP; /* an fd where none belongs: refused, and no stop */
	assert_int_equal(raw(f.sock, &rq, sizeof(rq), 0), -EINVAL);
	/* a log that is no regular file */
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(keeper_set_log(f.sock, p[1], 100, 0), -EINVAL);
	close(p[0]);
	close(p[1]);
	/* nothing changed: the runtime log goes on */
	put(f.p[1], "still here\n");
	assert_int_equal(keeper_sync(f.sock, NULL), 0);
	char buf[64];
	slurp(f.log, buf, sizeof(buf));
	assert_string_equal(buf, "still here\n");
	stop(&f);
}

static void test_bad_specs(void **state)
{
	int p[2];
	pid_t pid;
	(void)state;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	struct keeper_spec ks = {.sock_path = NULL, .cgroup_of = getpid(), .drain_fd = p[0]};
	assert_int_equal(keeper_start(&ks, &pid), -EINVAL);
	ks.sock_path = "/tmp/labd-unit-keeper-bad.sock";
	ks.n_held = KEEPER_HELD_MAX + 1;
	assert_int_equal(keeper_start(&ks, &pid), -EINVAL);
	ks.n_held = 1;
	ks.held_fds[0] = 1000;
	assert_int_equal(keeper_start(&ks, &pid), -EBADF);
	ks.n_held = 0;
	ks.cgroup_of = 0;
	assert_int_equal(keeper_start(&ks, &pid), -EINVAL);
	/* a process that is gone: no cgroups to join, the keeper says so and exits */
	pid_t gone = fork();
	if (gone == 0)
		_exit(0);
	waitpid(gone, NULL, 0);
	ks.cgroup_of = gone;
	assert_int_equal(keeper_start(&ks, &pid), -ENOENT);
	close(p[0]);
	close(p[1]);
	unlink(ks.sock_path);
	/* a keeper that is not there */
	assert_int_equal(keeper_sync("/tmp/labd-unit-keeper-none.sock", NULL), -ENOENT);
}

/* Its own session, its holder's cgroups, and no fd of ours but what it keeps. */
static void test_what_it_holds(void **state)
{
	struct fixture f;
	char path[64], a[2048], b[2048];
	int stray = open("/dev/null", O_RDONLY); /* inherited without O_CLOEXEC */
	(void)state;
	start(&f, true, NULL, 0);
	assert_int_equal(getsid(f.keeper), f.keeper);
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)f.keeper);
	slurp(path, a, sizeof(a));
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)f.holder);
	slurp(path, b, sizeof(b));
	assert_string_equal(a, b);
	/* 0, 1, 2, the socket, the pipe: nothing else (the log opens at the first output) */
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)f.keeper);
	int n = 0;
	for (int tries = 0; tries < 100 && n != 5; tries++) { /* its ready pipe closes last */
		DIR *d = opendir(path);
		n = 0;
		for (struct dirent *e; d && (e = readdir(d));)
			n += e->d_name[0] != '.';
		if (d)
			closedir(d);
		if (n != 5)
			usleep(10000);
	}
	assert_int_equal(n, 5);
	close(stray);
	stop(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_output_survives_parent),
		cmocka_unit_test(test_rotation),
		cmocka_unit_test(test_set_log_and_sync),
		cmocka_unit_test(test_fetch),
		cmocka_unit_test(test_exit_on_eof),
		cmocka_unit_test(test_non_root_refused),
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_bad_specs),
		cmocka_unit_test(test_what_it_holds),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests_name("keeper", tests, NULL, NULL);
}
