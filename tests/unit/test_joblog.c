/* Unit tests: a job's capped log (server/supervisor/joblog.c): owner and
 * modes, appending across opens, the cap with its one marker line; its copy
 * into the home replaces whatever the user left at the name, never opening
 * it (a FIFO there blocked the upload for ever). */
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <grp.h>

#include "supervisor/joblog.h"

static size_t slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;
	assert_true(fd >= 0);
	n = read(fd, buf, len - 1);
	close(fd);
	assert_true(n >= 0);
	buf[n] = '\0';
	return (size_t)n;
}

static void test_modes_and_append(void **state)
{
	char dir[64], path[256], buf[256];
	struct joblog l;
	struct stat st;
	(void)state;
	unit_tempdir(dir);
	assert_int_equal(joblog_dir_mode("local"), 0750);
	assert_int_equal(joblog_dir_mode("slurm"), 0770); /* a head: labd-web writes there */
	assert_int_equal(joblog_prepare_dir(dir, 4242, 0770), 0);
	snprintf(path, sizeof(path), "%s/joblogs", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0770);
	assert_int_equal(joblog_prepare_dir(dir, 4242, joblog_dir_mode("local")), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0750);
	assert_int_equal(st.st_uid, 0);
	assert_int_equal(st.st_gid, 4242);
	assert_int_equal(joblog_open(&l, dir, 17, 1 << 20, 4242), 0);
	joblog_append(&l, "epoch 1 loss 0.9\n", 17);
	joblog_close(&l);
	joblog_close(&l); /* twice is fine */
	joblog_path(dir, 17, path, sizeof(path));
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(st.st_gid, 4242);
	/* a retry continues the same file, never truncating it */
	assert_int_equal(joblog_open(&l, dir, 17, 1 << 20, 4242), 0);
	assert_int_equal(l.size_bytes, 17);
	joblog_append(&l, "epoch 2 loss 0.5\n", 17);
	joblog_close(&l);
	slurp(path, buf, sizeof(buf));
	assert_string_equal(buf, "epoch 1 loss 0.9\nepoch 2 loss 0.5\n");
	unit_rmdir(dir);
}

/* As labd-web (another uid in the log's group), opens path read-only until told
 * to stop on fd `stop`; writes to `out` how many opens were refused. */
static void reader(const char *path, int stop, int out)
{
	char c;
	int refused = 0;

	if (setgid(4242) < 0 || setgroups(0, NULL) < 0 || setuid(4243) < 0)
		_exit(2);
	fcntl(stop, F_SETFL, O_NONBLOCK);
	while (read(stop, &c, 1) < 0) {
		int fd = open(path, O_RDONLY);
		if (fd >= 0)
			close(fd);
		else if (errno == EACCES)
			refused++;
	}
	_exit(write(out, &refused, sizeof(refused)) == sizeof(refused) ? 0 : 3);
}

/* labd-web polls a job's log while the supervisor creates it: no open of its may
 * fail (the plain open-then-chown left a moment where the file was root:root,
 * and the log page answered 500). */
static void test_a_reader_never_sees_it_root_only(void **state)
{
	char dir[64], path[256];
	int stop[2], out[2], refused = -1, status;
	struct joblog l;
	pid_t pid;
	(void)state;
	unit_tempdir(dir);
	assert_int_equal(chmod(dir, 0755), 0);
	assert_int_equal(joblog_prepare_dir(dir, 4242, 0750), 0);
	joblog_path(dir, 9, path, sizeof(path));
	assert_int_equal(pipe(stop), 0);
	assert_int_equal(pipe(out), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		reader(path, stop[0], out[1]);
	for (int i = 0; i < 3000; i++) {
		assert_int_equal(joblog_open(&l, dir, 9, 1 << 20, 4242), 0);
		joblog_close(&l);
		assert_int_equal(unlink(path), 0);
	}
	assert_int_equal(write(stop[1], "x", 1), 1);
	assert_int_equal(read(out[0], &refused, sizeof(refused)), sizeof(refused));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(status, 0);
	assert_int_equal(refused, 0);
	for (int i = 0; i < 2; i++) {
		close(stop[i]);
		close(out[i]);
	}
	unit_rmdir(dir);
}

static void test_cap(void **state)
{
	char dir[64], path[256], buf[512], marker[80];
	struct joblog l;
	(void)state;
	unit_tempdir(dir);
	assert_int_equal(joblog_prepare_dir(dir, 0, 0750), 0);
	assert_int_equal(joblog_open(&l, dir, 5, 20, 0), 0);
	joblog_append(&l, "0123456789\n", 11);
	joblog_append(&l, "abcdefghijklmnop\n", 17); /* crosses the cap mid-line */
	joblog_append(&l, "dropped\n", 8);
	assert_true(l.capped);
	joblog_close(&l);
	joblog_path(dir, 5, path, sizeof(path));
	size_t n = slurp(path, buf, sizeof(buf));
	joblog_marker(20, marker, sizeof(marker));
	assert_string_equal(marker, "[labd: log capped at 20 bytes]\n");
	snprintf(path, sizeof(path), "0123456789\nabcdefghi\n%s", marker);
	assert_string_equal(buf, path);
	assert_int_equal(n, 20 + 1 + strlen(marker));
	/* reopened past its cap: stays cut, nothing more is written */
	assert_int_equal(joblog_open(&l, dir, 5, 20, 0), 0);
	assert_true(l.capped);
	joblog_append(&l, "more\n", 5);
	joblog_close(&l);
	joblog_path(dir, 5, path, sizeof(path));
	assert_int_equal(slurp(path, buf, sizeof(buf)), n);
	/* a cut exactly at a line end adds no blank line */
	assert_int_equal(joblog_open(&l, dir, 6, 11, 0), 0);
	joblog_append(&l, "0123456789\nx", 12);
	joblog_close(&l);
	joblog_path(dir, 6, path, sizeof(path));
	slurp(path, buf, sizeof(buf));
	assert_string_equal(buf, "0123456789\n[labd: log capped at 11 bytes]\n");
	unit_rmdir(dir);
}

/* A link planted where the log should be is refused (O_NOFOLLOW). */
static void test_refuses_symlink(void **state)
{
	char dir[64], path[256];
	struct joblog l;
	(void)state;
	unit_tempdir(dir);
	assert_int_equal(joblog_prepare_dir(dir, 0, 0750), 0);
	joblog_path(dir, 9, path, sizeof(path));
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_true(joblog_open(&l, dir, 9, 100, 0) < 0);
	assert_int_equal(l.fd, -1);
	unit_rmdir(dir);
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* One planted thing at log.txt: the copy returns at once (an alarm would cut
 * a blocked open: EINTR), and a regular file of the owner's holds the log. */
static void copy_over(const char *dir, const char *log, const char *what)
{
	char path[256], buf[64];
	struct stat st;
	int dfd = open(dir, O_PATH | O_DIRECTORY);

	assert_true(dfd >= 0);
	alarm(2);
	int rc = joblog_copy_out(log, dfd, "log.txt", 4242);
	alarm(0);
	if (rc != 0)
		fail_msg("copy over a %s: %s", what, strerror(-rc));
	close(dfd);
	snprintf(path, sizeof(path), "%s/log.txt", dir);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_uid, 4242);
	assert_int_equal(st.st_mode & 07777, 0644);
	slurp(path, buf, sizeof(buf));
	assert_string_equal(buf, "epoch 1\n");
}

static void test_copy_out_replaces_what_the_user_left(void **state)
{
	char dir[64], log[128], path[256], target[256];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct sigaction act = {.sa_handler = on_alarm}; /* no SA_RESTART */
	int fd, s;
	(void)state;
	sigaction(SIGALRM, &act, NULL);
	unit_tempdir(dir);
	snprintf(log, sizeof(log), "%s/job.log", dir);
	fd = open(log, O_WRONLY | O_CREAT, 0640);
	assert_int_equal(write(fd, "epoch 1\n", 8), 8);
	close(fd);
	snprintf(path, sizeof(path), "%s/log.txt", dir);

	assert_int_equal(mkfifo(path, 0644), 0);
	copy_over(dir, log, "FIFO");
	unlink(path);
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.100s", path);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	copy_over(dir, log, "socket");
	close(s);
	unlink(path);
	assert_int_equal(mknod(path, S_IFCHR | 0666, makedev(1, 3)), 0); /* /dev/null's */
	copy_over(dir, log, "device node");
	unlink(path);
	/* a link is replaced, its target untouched */
	snprintf(target, sizeof(target), "%s/target", dir);
	fd = open(target, O_WRONLY | O_CREAT, 0600);
	close(fd);
	assert_int_equal(symlink(target, path), 0);
	copy_over(dir, log, "symlink");
	assert_int_equal(stat(target, &(struct stat){0}), 0);
	char buf[8];
	assert_int_equal(slurp(target, buf, sizeof(buf)), 0);
	/* a folder stays, the copy is refused and leaves nothing behind */
	unlink(path);
	assert_int_equal(mkdir(path, 0755), 0);
	fd = open(dir, O_PATH | O_DIRECTORY);
	assert_int_equal(joblog_copy_out(log, fd, "log.txt", 4242), -EISDIR);
	close(fd);
	int n = 0;
	DIR *d = opendir(dir);
	assert_non_null(d);
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.' || (e->d_name[1] && strcmp(e->d_name, "..") != 0);
	closedir(d);
	assert_int_equal(n, 3); /* job.log, log.txt (the folder), target */
	unit_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_modes_and_append),
		cmocka_unit_test(test_a_reader_never_sees_it_root_only),
		cmocka_unit_test(test_cap),
		cmocka_unit_test(test_refuses_symlink),
		cmocka_unit_test(test_copy_out_replaces_what_the_user_left),
	};
	return cmocka_run_group_tests_name("joblog", tests, NULL, NULL);
}
