/* test_start.c - sandbox_start_err: a failing step is named; stdio comes from the spec.
 *
 * The pure parts (the child's report, the title area) run anywhere.  The starts need
 * root, namespaces and cgroups: they run when tests/security/run.sh runs this test and
 * exports SANDBOX_TEST_STATE_DIR and SANDBOX_TEST_CGROUP_PARENT (its cleanup removes
 * what is left); elsewhere they are skipped, except the spec check, which takes nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "labd/sandbox.h"
#include "sandbox/child.h"
#include "sandbox/home.h"
#include "sandbox/title.h"

static char *sh_argv[] = {"/bin/sh", "-c", "cat; echo out; echo err >&2", NULL};

static void test_report_parse(void **st)
{
	char step[SANDBOX_STEP_MAX], msg[128];
	static const char rep[] = "mount-sources\0clone root /x: No such file or directory";

	(void)st;
	child_report_parse(rep, sizeof(rep) - 1, step, sizeof(step), msg, sizeof(msg));
	assert_string_equal(step, "mount-sources");
	assert_string_equal(msg, "clone root /x: No such file or directory");
	child_report_parse("no separator", 12, step, sizeof(step), msg, sizeof(msg));
	assert_string_equal(step, "child");
	assert_string_equal(msg, "no separator");
	child_report_parse("exec\0", 5, step, sizeof(step), msg, sizeof(msg));
	assert_string_equal(step, "exec");
	assert_string_equal(msg, "");
}

static void test_title_area(void **st)
{
	/* comm with spaces and ")" as a process may name itself; fields 48-51 at the end */
	static const char stat[] =
		"42 (a) b) (c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123 1000 50 "
		"18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 100 200 300 "
		"140000 140040 140040 140100 0\n";
	struct title_area a;

	(void)st;
	assert_int_equal(title_area_parse(stat, &a), 0);
	assert_int_equal(a.arg_start, 140000);
	assert_int_equal(a.arg_end, 140040);
	assert_int_equal(a.env_start, 140040);
	assert_int_equal(a.env_end, 140100);
	assert_int_equal(title_room(&a), 100); /* the environment follows: usable too */
	a.env_start = 150000;
	assert_int_equal(title_room(&a), 40);
	assert_int_equal(title_area_parse("42 (x) S 1 2 3\n", &a), -1);
	assert_int_equal(title_area_parse("garbage", &a), -1);
}

static struct sandbox_spec base_spec(void)
{
	struct sandbox_spec s;

	sandbox_spec_init(&s);
	s.user = "stepper";
	s.user_id = 9;
	s.argv = sh_argv;
	s.die_with_parent = true;
	if (getenv("SANDBOX_TEST_STATE_DIR"))
		s.state_dir = getenv("SANDBOX_TEST_STATE_DIR");
	if (getenv("SANDBOX_TEST_CGROUP_PARENT"))
		s.cgroup_parent = getenv("SANDBOX_TEST_CGROUP_PARENT");
	return s;
}

static bool can_start(void)
{
	return geteuid() == 0 && getenv("SANDBOX_TEST_STATE_DIR") &&
	       getenv("SANDBOX_TEST_CGROUP_PARENT");
}

static void test_step_spec(void **st)
{
	struct sandbox_spec s = base_spec();
	struct sandbox_handle h;
	struct sandbox_error err;
	int fds[2];

	(void)st;
	s.user = "Not A User";
	assert_int_equal(sandbox_start_err(&s, &h, &err), -1);
	assert_string_equal(err.step, "spec");
	assert_string_equal(err.message, "step spec: bad user name: Not A User");
	assert_int_equal(h.pid, -1);
	assert_int_equal(h.status_fd, -1);

	s = base_spec();
	assert_int_equal(pipe(fds), 0);
	close(fds[0]);
	close(fds[1]);
	s.stdout_fd = fds[1]; /* closed: the caller's mistake is the spec's */
	assert_int_equal(sandbox_start_err(&s, &h, &err), -1);
	assert_string_equal(err.step, "spec");
	assert_non_null(strstr(err.message, "stdout: fd"));
}

static void test_step_home(void **st)
{
	struct sandbox_spec s = base_spec();
	struct sandbox_handle h;
	struct sandbox_error err;
	char img[256];

	(void)st;
	if (!can_start())
		skip();
	snprintf(img, sizeof(img), "%s/no-such-dir/sub/stepper.img", s.state_dir);
	s.home_image = img;
	s.home_size_bytes = 64ull << 20;
	assert_int_equal(sandbox_start_err(&s, &h, &err), -1);
	assert_string_equal(err.step, "home");
	assert_non_null(strstr(err.message, "step home: mkdir "));
	assert_non_null(strstr(err.message, "No such file or directory"));
}

/* A home's mount point is keyed by user id and serves one image only: one that
 * holds another image is refused while referenced, replaced when not; a mount by
 * user name (the release before) is found only for its own image. */
static void test_home_mount_point_serves_one_image(void **st)
{
	const char *state = getenv("SANDBOX_TEST_STATE_DIR");
	char a[256], b[256], key[HOME_KEY_MAX], mnt[512];
	int fd;

	(void)st;
	if (!can_start())
		skip();
	snprintf(a, sizeof(a), "%s/keyed-a.img", state);
	snprintf(b, sizeof(b), "%s/keyed-b.img", state);
	assert_int_equal(home_ensure(a, 32ull << 20, 0), 0);
	assert_int_equal(home_ensure(b, 32ull << 20, 0), 0);
	home_key(990001, key, sizeof(key));
	assert_string_equal(key, "990001");
	assert_int_equal(home_mount_ref(state, key, a, "holder-a"), 0);
	home_mount_path(state, key, mnt, sizeof(mnt));
	snprintf(mnt + strlen(mnt), sizeof(mnt) - strlen(mnt), "/a-was-here");
	assert_true((fd = open(mnt, O_WRONLY | O_CREAT, 0600)) >= 0);
	close(fd);
	/* in use: never handed out for another image */
	assert_int_equal(home_mount_ref(state, key, b, "holder-b"), -1);
	assert_int_equal(access(mnt, F_OK), 0);
	/* a left-over mount nobody references: replaced by the image asked for */
	char ref[512];
	snprintf(ref, sizeof(ref), "%s/homes/%s/refs/holder-a", state, key);
	assert_int_equal(unlink(ref), 0);
	assert_int_equal(home_mount_ref(state, key, b, "holder-b"), 0);
	assert_int_equal(access(mnt, F_OK), -1);
	assert_int_equal(home_unref(state, key, "holder-b"), 0);
	assert_false(home_mounted(state, key));

	/* the release before mounted by name: found for its own image only */
	assert_int_equal(home_mount_ref(state, "legacyname", a, "holder-old"), 0);
	home_key_find(state, 990002, "legacyname", a, key, sizeof(key));
	assert_string_equal(key, "legacyname");
	home_key_find(state, 990002, "legacyname", b, key, sizeof(key));
	assert_string_equal(key, "990002");
	assert_int_equal(home_unref(state, "legacyname", "holder-old"), 0);
	unlink(a);
	unlink(b);
}

/* The first line of the attached home's loop device's sysfs file rel into buf. */
static void home_loop_attr(const char *mnt, const char *rel, char *buf, size_t len)
{
	char path[256];
	struct stat st;
	FILE *f;

	assert_int_equal(stat(mnt, &st), 0);
	assert_int_equal(major(st.st_dev), 7); /* a loop device */
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/%s", major(st.st_dev),
		 minor(st.st_dev), rel);
	assert_non_null(f = fopen(path, "re"));
	assert_non_null(fgets(buf, (int)len, f));
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
}

/* A new home has 4 KiB ext4 blocks, also when small, and its loop device takes the
 * same logical block size with direct I/O on; an image of 1 KiB blocks (mkfs.ext4's
 * own choice below 512 MiB, what older releases made) still mounts, at 1 KiB; a home
 * mounted by an older release is adopted on its own device. */
static void test_home_loop_block_size(void **st)
{
	const char *state = getenv("SANDBOX_TEST_STATE_DIR");
	char img[256], old[256], cmd[1200], key[HOME_KEY_MAX], mnt[512], buf[32];

	(void)st;
	if (!can_start())
		skip();
	snprintf(img, sizeof(img), "%s/blocks-new.img", state);
	snprintf(old, sizeof(old), "%s/blocks-old.img", state);
	unlink(img); /* a run before that failed half-way */
	assert_int_equal(home_ensure(img, 32ull << 20, 0), 0);
	home_key(990003, key, sizeof(key));
	assert_int_equal(home_mount_ref(state, key, img, "holder-new"), 0);
	home_mount_path(state, key, mnt, sizeof(mnt));
	home_loop_attr(mnt, "queue/logical_block_size", buf, sizeof(buf));
	assert_string_equal(buf, "4096");
	home_loop_attr(mnt, "loop/dio", buf, sizeof(buf));
	assert_string_equal(buf, "1");
	assert_int_equal(home_unref(state, key, "holder-new"), 0);

	snprintf(cmd, sizeof(cmd), "truncate -s 32M %s && mkfs.ext4 -q -F -b 1024 %s", old, old);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(home_mount_ref(state, key, old, "holder-old"), 0);
	home_loop_attr(mnt, "queue/logical_block_size", buf, sizeof(buf));
	assert_string_equal(buf, "1024");
	assert_int_equal(home_unref(state, key, "holder-old"), 0);
	assert_false(home_mounted(state, key));

	/* mounted by a release before (512-byte blocks, no direct I/O): adopted as it
	 * is, never attached a second time */
	snprintf(cmd, sizeof(cmd), "mount -o loop,nodev,nosuid %s %s", img, mnt);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(home_mount_ref(state, key, img, "holder-adopt"), 0);
	home_loop_attr(mnt, "queue/logical_block_size", buf, sizeof(buf));
	assert_string_equal(buf, "512");
	assert_true(home_attached(img));
	assert_int_equal(home_unref(state, key, "holder-adopt"), 0);
	assert_false(home_mounted(state, key));
	unlink(img);
	unlink(old);
}

static void test_step_exec(void **st)
{
	static char *argv[] = {"/no/such/command", NULL};
	struct sandbox_spec s = base_spec();
	struct sandbox_handle h;
	struct sandbox_error err;

	(void)st;
	if (!can_start())
		skip();
	s.argv = argv;
	assert_int_equal(sandbox_start_err(&s, &h, &err), -1);
	assert_string_equal(err.step, "exec");
	assert_string_equal(err.message, "step exec: exec /no/such/command: No such file or directory");
}

static size_t read_all(int fd, char *buf, size_t size)
{
	size_t used = 0;
	ssize_t n;

	while (used < size - 1 && (n = read(fd, buf + used, size - 1 - used)) > 0)
		used += (size_t)n;
	buf[used] = '\0';
	return used;
}

/* stdout and stderr into a pipe of ours, stdin /dev/null (cat ends at once), and our
 * own stdout is the same file before and after */
static void test_stdio_in_spec(void **st)
{
	struct sandbox_spec s = base_spec();
	struct sandbox_handle h;
	struct sandbox_result res;
	struct stat before, after;
	char buf[256];
	int p[2];

	(void)st;
	if (!can_start())
		skip();
	assert_int_equal(fstat(STDOUT_FILENO, &before), 0);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	s.stdin_fd = SANDBOX_FD_NULL;
	s.stdout_fd = p[1];
	s.stderr_fd = p[1];
	assert_int_equal(sandbox_start_err(&s, &h, NULL), 0);
	close(p[1]);
	read_all(p[0], buf, sizeof(buf));
	close(p[0]);
	assert_string_equal(buf, "out\nerr\n");
	assert_int_equal(sandbox_wait(&h, &res), 0);
	assert_int_equal(res.kind, SANDBOX_EXITED);
	assert_int_equal(res.code, 0);
	assert_int_equal(sandbox_destroy(&h), 0);
	assert_int_equal(fstat(STDOUT_FILENO, &after), 0);
	assert_true(before.st_dev == after.st_dev && before.st_ino == after.st_ino);
}

static void slurp_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	read_all(fd, buf, size);
	close(fd);
}

/* Whether a /proc/PID/cgroup controller list ("cpu,cpuacct"; "" for v2) is one of
 * the hierarchies a sandbox is put in. */
static bool sandbox_hierarchy(const char *ctls)
{
	static const char *const used[] = {"memory", "cpu",     "pids",    "blkio",
					   "devices", "freezer", "cpuacct", NULL};
	char copy[256], *save = NULL;

	if (!ctls[0])
		return true;
	snprintf(copy, sizeof(copy), "%s", ctls);
	for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save))
		for (const char *const *u = used; *u; u++)
			if (strcmp(w, *u) == 0)
				return true;
	return false;
}

/* Moves this thread into cgroup dir (v1 tasks, v2 cgroup.procs). */
static void move_to(const char *dir, int v1)
{
	char path[1100];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, v1 ? "tasks" : "cgroup.procs");
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		print_error("open %s: %s\n", path, strerror(errno));
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0", 1), 1);
	close(fd);
}

/* The child is born in its cgroups (cgbox_birth_enter: this thread enters the v1 ones,
 * clone3 into the v2 one) and this thread is back in its own afterwards: init's
 * /proc/PID/cgroup names <parent>/<id> in every hierarchy a sandbox uses, ours is
 * what it was before the start. */
static void test_born_in_cgroups(void **st)
{
	static char *argv[] = {"/bin/sh", "-c", "read x", NULL};
	struct sandbox_spec s = base_spec();
	struct sandbox_handle h;
	struct sandbox_result res;
	char before[2048], after[2048], init[2048], path[64], want[256], *save = NULL;
	int p[2], seen = 0;

	(void)st;
	if (!can_start())
		skip();
	/* this thread in a memory cgroup of its own: going back to a hierarchy's root
	 * instead of where it was must show */
	int v1 = access("/sys/fs/cgroup/memory/tasks", F_OK) == 0;
	char caller[256], home[1024], *m;
	snprintf(caller, sizeof(caller), "%s/%s/caller", v1 ? "/sys/fs/cgroup/memory" : "/sys/fs/cgroup",
		 s.cgroup_parent);
	slurp_file("/proc/thread-self/cgroup", before, sizeof(before));
	m = strstr(before, v1 ? ":memory:" : "0::");
	assert_non_null(m);
	m += v1 ? strlen(":memory:") : strlen("0::"); /* the path after the controllers */
	snprintf(home, sizeof(home), "%s%.*s", v1 ? "/sys/fs/cgroup/memory" : "/sys/fs/cgroup",
		 (int)strcspn(m, "\n"), m);
	/* the sandboxes' parent may not exist yet (the first start makes it) */
	char parent[256];
	snprintf(parent, sizeof(parent), "%.*s", (int)(strrchr(caller, '/') - caller), caller);
	assert_true(mkdir(parent, 0755) == 0 || errno == EEXIST);
	assert_true(mkdir(caller, 0755) == 0 || errno == EEXIST);
	move_to(caller, v1);
	slurp_file("/proc/thread-self/cgroup", before, sizeof(before));
	assert_non_null(strstr(before, "/caller\n"));
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	s.argv = argv;
	s.stdin_fd = p[0];
	s.stdout_fd = s.stderr_fd = SANDBOX_FD_NULL;
	s.mem_bytes = 256ull << 20;
	s.pids_max = 64;
	assert_int_equal(sandbox_start_err(&s, &h, NULL), 0);
	close(p[0]);
	slurp_file("/proc/thread-self/cgroup", after, sizeof(after));
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)h.pid);
	slurp_file(path, init, sizeof(init));
	snprintf(want, sizeof(want), "/%s/%s", s.cgroup_parent, h.id);
	close(p[1]); /* read x ends: the command exits */
	assert_int_equal(sandbox_wait(&h, &res), 0);
	assert_int_equal(res.kind, SANDBOX_EXITED);
	assert_int_equal(sandbox_destroy(&h), 0);
	move_to(home, v1);
	rmdir(caller);
	assert_string_equal(before, after);
	for (char *line = strtok_r(init, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		assert_non_null(c2);
		*c2 = '\0';
		if (!sandbox_hierarchy(c1 + 1))
			continue;
		assert_string_equal(c2 + 1, want);
		seen++;
	}
	assert_true(seen >= 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_report_parse),
		cmocka_unit_test(test_title_area),
		cmocka_unit_test(test_step_spec),
		cmocka_unit_test(test_step_home),
		cmocka_unit_test(test_home_mount_point_serves_one_image),
		cmocka_unit_test(test_home_loop_block_size),
		cmocka_unit_test(test_step_exec),
		cmocka_unit_test(test_stdio_in_spec),
		cmocka_unit_test(test_born_in_cgroups),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
