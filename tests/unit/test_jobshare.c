/* Unit tests: the copy of a job's folders from algo-1 to the other hosts
 * (sandbox/jobshare.c), over loopback: files, folders and modes arrive in each
 * host's folders; links, FIFOs are left out; a host whose scratch home fills
 * fails with the reason; a record whose path climbs out is refused and writes
 * nothing; no listener, or a host that never comes, fails in
 * time with the reason. */
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "sandbox/jobshare.h"

static int free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static void put(const char *dir, const char *name, const char *text, size_t len, mode_t mode)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

/* dir/name into buf (a test's own short paths) */
static const char *at(char *buf, size_t len, const char *dir, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
	return buf;
}

static void same(const char *a, const char *b, const char *name)
{
	char pa[512], pb[512], da[200000], db[200000];
	struct stat sa, sb;
	int fa, fb;
	ssize_t na, nb;

	snprintf(pa, sizeof(pa), "%s/%s", a, name);
	snprintf(pb, sizeof(pb), "%s/%s", b, name);
	assert_int_equal(lstat(pa, &sa), 0);
	if (lstat(pb, &sb) < 0)
		fail_msg("%s did not arrive", pb);
	assert_true(S_ISREG(sb.st_mode));
	assert_int_equal(sa.st_mode & 0777, sb.st_mode & 0777);
	fa = open(pa, O_RDONLY);
	fb = open(pb, O_RDONLY);
	na = read(fa, da, sizeof(da));
	nb = read(fb, db, sizeof(db));
	close(fa);
	close(fb);
	assert_int_equal(na, nb);
	assert_memory_equal(da, db, (size_t)na);
}

static void test_paths(void **state)
{
	(void)state;
	assert_true(jobshare_path_ok("a"));
	assert_true(jobshare_path_ok("a/b.c/..d"));
	assert_false(jobshare_path_ok(""));
	assert_false(jobshare_path_ok("/etc/passwd"));
	assert_false(jobshare_path_ok("../x"));
	assert_false(jobshare_path_ok("a/../../x"));
	assert_false(jobshare_path_ok("a/./b"));
	assert_false(jobshare_path_ok("a//b"));
	assert_false(jobshare_path_ok("a/"));
	assert_false(jobshare_path_ok(".."));
}

/* algo-1 serves two folders to two hosts; each gets both, whole. */
static void test_two_hosts_get_both_folders(void **state)
{
	char src[64], chan[64], dst[2][2][64], *from[2], *to[2][2], err[256], big[150000];
	struct jobshare_count sent, got;
	int port = free_port(), status;
	pid_t pid;
	(void)state;

	unit_tempdir(src);
	unit_tempdir(chan);
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7 + i / 251);
	put(src, "train.py", "print(6*7)\n", 11, 0644);
	put(src, "empty", "", 0, 0600);
	assert_int_equal(mkdir(at(err, sizeof(err), src, "sub"), 0755), 0);
	assert_int_equal(mkdir(at(err, sizeof(err), src, "sub/deeper"), 0750), 0);
	put(src, "sub/deeper/run.sh", "#!/bin/sh\n", 10, 0755);
	put(chan, "x.bin", big, sizeof(big), 0640);
	assert_int_equal(symlink("/etc/passwd", at(err, sizeof(err), src, "link")), 0);
	assert_int_equal(mkfifo(at(err, sizeof(err), src, "fifo"), 0600), 0);
	from[0] = src;
	from[1] = chan;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(jobshare_serve("127.0.0.1", port, 2, from, 2, 20, &sent, err, sizeof(err)) == 0 &&
			      sent.files == 4 /* what each host got */
		      ? 0
		      : 1);
	for (int h = 0; h < 2; h++) {
		for (int r = 0; r < 2; r++) {
			unit_tempdir(dst[h][r]);
			to[h][r] = dst[h][r];
		}
		if (jobshare_fetch("127.0.0.1", port, to[h], 2, 20, &got, err, sizeof(err)) < 0)
			fail_msg("fetch %d: %s", h, err);
		assert_int_equal(got.files, 4);
		assert_int_equal(got.bytes, 11 + 10 + sizeof(big));
		same(src, dst[h][0], "train.py");
		same(src, dst[h][0], "empty");
		same(src, dst[h][0], "sub/deeper/run.sh");
		same(chan, dst[h][1], "x.bin");
		struct stat st;
		char p[320];
		snprintf(p, sizeof(p), "%s/sub/deeper", dst[h][0]);
		assert_int_equal(stat(p, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0750);
		snprintf(p, sizeof(p), "%s/link", dst[h][0]);
		assert_int_equal(lstat(p, &st), -1);
		snprintf(p, sizeof(p), "%s/fifo", dst[h][0]);
		assert_int_equal(lstat(p, &st), -1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(status, 0);
	unit_rmdir(src);
	unit_rmdir(chan);
	for (int h = 0; h < 2; h++)
		for (int r = 0; r < 2; r++)
			unit_rmdir(dst[h][r]);
}

/* Hosts are served at once: one that does not read holds up no other. */
static void test_a_slow_host_holds_up_no_other(void **state)
{
	static char big[8 << 20];
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	char src[64], dst[64], err[256], buf[65536], *from[1] = {src}, *to[1] = {dst};
	struct jobshare_count sent, got;
	int port = free_port(), slow, status;
	size_t drained = 0;
	ssize_t r;
	pid_t pid;
	(void)state;

	unit_tempdir(src);
	unit_tempdir(dst);
	put(src, "big.bin", big, sizeof(big), 0644);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(jobshare_serve("127.0.0.1", port, 2, from, 1, 20, &sent, err, sizeof(err)) == 0
			      ? 0
			      : 1);
	/* the first host connects and reads nothing (its socket buffers fill) */
	sa.sin_port = htons((uint16_t)port);
	for (int i = 0; i < 100; i++) {
		slow = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(slow, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		close(slow);
		slow = -1;
		usleep(20 * 1000);
	}
	assert_true(slow >= 0);
	if (jobshare_fetch("127.0.0.1", port, to, 1, 20, &got, err, sizeof(err)) < 0)
		fail_msg("the second host waited for the first: %s", err);
	assert_int_equal(got.bytes, sizeof(big));
	while ((r = read(slow, buf, sizeof(buf))) > 0)
		drained += (size_t)r;
	close(slow);
	assert_true(drained > sizeof(big));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(status, 0);
	unit_rmdir(src);
	unit_rmdir(dst);
}

/* A folder bigger than the host's scratch home (a tmpfs of the job's memory): the fetch
 * fails, naming the file and the full file system. */
static void test_a_full_scratch_home_fails_with_the_reason(void **state)
{
	static char big[256 << 10];
	char src[64], dst[64], err[256], *from[1] = {src}, *to[1] = {dst};
	struct jobshare_count sent, got;
	int port = free_port(), status;
	pid_t pid;
	(void)state;

	unit_tempdir(src);
	unit_tempdir(dst);
	assert_int_equal(mount("tmpfs", dst, "tmpfs", 0, "size=64k"), 0);
	put(src, "data.bin", big, sizeof(big), 0644);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(jobshare_serve("127.0.0.1", port, 1, from, 1, 20, &sent, err, sizeof(err)) == 0
			      ? 0
			      : 1);
	int rc = jobshare_fetch("127.0.0.1", port, to, 1, 20, &got, err, sizeof(err));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(umount(dst), 0); /* before the checks: a failed one leaves no mount */
	assert_int_equal(rc, -1);
	if (!strstr(err, "writing data.bin: No space left on device"))
		fail_msg("%s", err);
	(void)status; /* algo-1's send may have fit in the socket's buffers: either way */
	unit_rmdir(src);
	unit_rmdir(dst);
}

/* A stream that names a path out of its folder: refused, nothing written there. */
static void test_a_path_out_of_the_folder_is_refused(void **state)
{
	static const char evil[] = "F 0 644 3 9\n../escape" "abc" "E 0 0 0 0\n";
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	char top[64], dst[80], err[256], *to[1] = {dst};
	struct jobshare_count got;
	int port = free_port(), lfd, status;
	struct stat st;
	pid_t pid;
	(void)state;

	unit_tempdir(top);
	snprintf(dst, sizeof(dst), "%s/chan", top);
	assert_int_equal(mkdir(dst, 0755), 0);
	sa.sin_port = htons((uint16_t)port);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 1), 0);
	pid = fork();
	if (pid == 0) {
		int c = accept(lfd, NULL, NULL);
		_exit(c >= 0 && write(c, evil, sizeof(evil) - 1) == sizeof(evil) - 1 ? 0 : 1);
	}
	close(lfd);
	assert_int_equal(jobshare_fetch("127.0.0.1", port, to, 1, 10, &got, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not beneath"));
	snprintf(err, sizeof(err), "%s/escape", top);
	assert_int_equal(stat(err, &st), -1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	unit_rmdir(top);
}

/* Nobody listens: the fetch gives up at its time; a host that never comes: the
 * serve does. */
static void test_waits_end_with_the_reason(void **state)
{
	char dir[64], err[256], *roots[1] = {dir};
	struct jobshare_count n;
	int port = free_port();
	(void)state;

	unit_tempdir(dir);
	assert_int_equal(jobshare_fetch("127.0.0.1", port, roots, 1, 1, &n, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "connecting to algo-1"));
	assert_int_equal(jobshare_serve("127.0.0.1", port, 1, roots, 1, 1, &n, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "1 of 1 hosts did not come"));
	assert_int_equal(jobshare_serve("no-address", port, 1, roots, 1, 1, &n, err, sizeof(err)),
			 -1);
	unit_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_two_hosts_get_both_folders),
		cmocka_unit_test(test_a_slow_host_holds_up_no_other),
		cmocka_unit_test(test_a_full_scratch_home_fails_with_the_reason),
		cmocka_unit_test(test_a_path_out_of_the_folder_is_refused),
		cmocka_unit_test(test_waits_end_with_the_reason),
	};
	return cmocka_run_group_tests_name("jobshare", tests, NULL, NULL);
}
