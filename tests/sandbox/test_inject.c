/* test_inject.c - binds at another path, and mounts injected into and ejected from a
 * live sandbox, in real namespaces (tests/sandbox/boxsh.h; root only, run by
 * tests/security/run.sh).  The layout is the job pool's: a root-owned skeleton bound
 * read-only at /opt/ml (under the hidden /opt), home folders injected below it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "boxsh.h"

#define USER_ID 11
#define HOST_UID (200000 + USER_ID)

static char state[512], skel[640], img[640];
static struct boxsh box;
static char out[8192];

static void mkdir_p(const char *root, const char *rel, uid_t owner)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *p = path + strlen(root) + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			if (mkdir(path, 0755) == 0)
				assert_int_equal(chown(path, owner, owner), 0);
			*p = c;
			if (!c)
				break;
		}
	}
}

static int setup(void **st)
{
	struct sandbox_spec s;
	static char rw_src[700];

	(void)st;
	if (!boxsh_can_start())
		return 0;
	snprintf(state, sizeof(state), "%s", getenv("SANDBOX_TEST_STATE_DIR"));
	snprintf(skel, sizeof(skel), "%s/pools/1/ml", state);
	snprintf(img, sizeof(img), "%s/imgs/injector.img", state);
	mkdir_p(state, "imgs", 0);
	mkdir_p(state, "pools/1/ml/input/data/train", 0);
	mkdir_p(state, "pools/1/ml/model", 0);
	mkdir_p(state, "pools/1/ml/output", 0);
	/* a rw bind of a host folder the user owns */
	snprintf(rw_src, sizeof(rw_src), "%s/pools/1/scratch", state);
	mkdir_p(state, "pools/1/scratch", HOST_UID);
	boxsh_spec(&s, "injector", USER_ID);
	s.home_image = img;
	s.home_size_bytes = 64ull << 20;
	s.binds[s.n_binds++] = (struct sandbox_bind){skel, "/opt/ml", true};
	s.binds[s.n_binds++] = (struct sandbox_bind){rw_src, "/opt/labd/scratch", false};
	return boxsh_start(&box, &s);
}

static int teardown(void **st)
{
	(void)st;
	if (boxsh_can_start())
		boxsh_stop(&box);
	return 0;
}

static void test_binds(void **st)
{
	char path[1024];
	struct stat sb;

	(void)st;
	if (!boxsh_can_start())
		skip();
	/* the skeleton is there, read-only, under /opt which hides the rest of the host's */
	assert_int_equal(boxsh_run(&box, "ls /opt/ml", out, sizeof(out)), 0);
	assert_string_equal(out, "input\nmodel\noutput\n");
	assert_int_equal(boxsh_run(&box, "ls /opt", out, sizeof(out)), 0);
	assert_string_equal(out, "labd\nml\n");
	assert_int_not_equal(boxsh_run(&box, "mkdir /opt/ml/x", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "Read-only file system"));
	/* the rw bind writes through to the host folder */
	assert_int_equal(boxsh_run(&box, "echo hi > /opt/labd/scratch/f", out, sizeof(out)), 0);
	snprintf(path, sizeof(path), "%s/pools/1/scratch/f", state);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_uid, HOST_UID);
	/* nosuid, nodev on both */
	assert_int_equal(boxsh_run(&box, "grep -E ' /opt/(ml|labd/scratch) ' /proc/self/mounts | "
					 "grep -c 'nosuid,nodev'", out, sizeof(out)), 0);
	assert_string_equal(out, "2\n");
}

static int open_home(const char *rel, bool create, int *fd)
{
	return sandbox_home_open_beneath(state, &box.h, rel, create, HOST_UID, fd, NULL);
}

static void test_inject_ro(void **st)
{
	char path[1024];
	int fd, f;

	(void)st;
	if (!boxsh_can_start())
		skip();
	assert_int_equal(open_home("data/train", true, &fd), 0);
	snprintf(path, sizeof(path), "%s/homes/11/mnt/data/train/x.csv", state);
	f = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(f >= 0);
	assert_int_equal(write(f, "1,2\n", 4), 4);
	close(f);
	assert_int_equal(sandbox_inject(&box.h, fd, "/opt/ml/input/data/train", true, NULL), 0);
	close(fd);
	assert_int_equal(boxsh_run(&box, "cat /opt/ml/input/data/train/x.csv", out, sizeof(out)), 0);
	assert_string_equal(out, "1,2\n");
	assert_int_not_equal(boxsh_run(&box, "touch /opt/ml/input/data/train/y", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "Read-only file system"));
	/* the user can write the same folder in the home: only the injected copy is ro */
	assert_int_equal(boxsh_run(&box, "touch ~/data/train/y", out, sizeof(out)), 0);
	assert_int_equal(boxsh_run(&box, "grep ' /opt/ml/input/data/train ' /proc/self/mounts | cut -d' ' -f4 | cut -d, -f1-3",
				   out, sizeof(out)), 0);
	assert_string_equal(out, "ro,nosuid,nodev\n");
}

static void test_inject_rw_and_eject(void **st)
{
	char path[1024];
	struct stat sb;
	int fd;

	(void)st;
	if (!boxsh_can_start())
		skip();
	assert_int_equal(open_home("jobs/j1/model", true, &fd), 0);
	/* made for the user, whatever the supervisor's umask */
	snprintf(path, sizeof(path), "%s/homes/11/mnt/jobs/j1", state);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_uid, HOST_UID);
	assert_int_equal(sb.st_mode & 07777, 0755);
	/* a shared home mount on the host (as under systemd): the copy inside is private */
	snprintf(path, sizeof(path), "%s/homes/11/mnt", state);
	assert_int_equal(mount(NULL, path, NULL, MS_SHARED, NULL), 0);
	assert_int_equal(sandbox_inject(&box.h, fd, "/opt/ml/model", false, NULL), 0);
	close(fd);
	assert_int_equal(boxsh_run(&box, "grep ' /opt/ml/model ' /proc/self/mountinfo", out, sizeof(out)), 0);
	assert_null(strstr(out, "shared:"));
	assert_null(strstr(out, "master:"));
	assert_int_equal(boxsh_run(&box, "echo weights > /opt/ml/model/m.pt", out, sizeof(out)), 0);
	snprintf(path, sizeof(path), "%s/homes/11/mnt/jobs/j1/model/m.pt", state);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_uid, HOST_UID);
	assert_int_equal(sandbox_eject(&box.h, "/opt/ml/model"), 0);
	assert_int_equal(boxsh_run(&box, "ls -A /opt/ml/model", out, sizeof(out)), 0);
	assert_string_equal(out, "");
	/* nothing is mounted there any more: the skeleton stays */
	assert_int_equal(sandbox_eject(&box.h, "/opt/ml/model"), -1);
	assert_int_equal(boxsh_run(&box, "ls /opt/ml", out, sizeof(out)), 0);
	assert_string_equal(out, "input\nmodel\noutput\n");
}

/* A symlink the user planted never leads the supervisor out of the home. */
static void test_home_symlinks(void **st)
{
	struct sandbox_error err;
	int fd = -1;

	(void)st;
	if (!boxsh_can_start())
		skip();
	assert_int_equal(boxsh_run(&box, "ln -s /etc ~/etc && ln -s ../../../.. ~/up && "
					 "mkdir -p ~/ok && ln -s ok ~/fine",
				   out, sizeof(out)), 0);
	assert_int_equal(sandbox_home_open_beneath(state, &box.h, "etc", false, HOST_UID, &fd, &err), -1);
	assert_int_equal(errno, EXDEV);
	assert_int_equal(fd, -1);
	assert_string_equal(err.step, "home");
	assert_non_null(strstr(err.message, "leaves the home"));
	assert_int_equal(open_home("etc/labd-created", true, &fd), -1);
	assert_int_equal(access("/etc/labd-created", F_OK), -1);
	assert_int_equal(open_home("up", false, &fd), -1);
	assert_int_equal(open_home("up/x", true, &fd), -1);
	/* one that stays inside resolves */
	assert_int_equal(open_home("fine", false, &fd), 0);
	close(fd);
	assert_int_equal(open_home("../x", false, &fd), -1);
	assert_int_equal(open_home("/etc", false, &fd), -1);
	assert_int_equal(open_home("", false, &fd), 0);
	close(fd);
}

/* The target inside is resolved without symlinks: a link in the skeleton is refused. */
static void test_inject_target_checked(void **st)
{
	struct sandbox_error err;
	char path[1024];
	int fd;

	(void)st;
	if (!boxsh_can_start())
		skip();
	snprintf(path, sizeof(path), "%s/link", skel);
	assert_int_equal(symlink("/opt/ml/model", path), 0);
	assert_int_equal(open_home("ok", false, &fd), 0);
	assert_int_equal(sandbox_inject(&box.h, fd, "/opt/ml/link", false, &err), -1);
	assert_string_equal(err.step, "inject");
	assert_non_null(strstr(err.message, "symlink"));
	assert_int_equal(sandbox_inject(&box.h, fd, "/opt/ml/no-such-dir", false, &err), -1);
	assert_int_equal(sandbox_inject(&box.h, fd, "/opt/ml/../ml/model", false, &err), -1);
	close(fd);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_binds),
		cmocka_unit_test(test_inject_ro),
		cmocka_unit_test(test_inject_rw_and_eject),
		cmocka_unit_test(test_home_symlinks),
		cmocka_unit_test(test_inject_target_checked),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
