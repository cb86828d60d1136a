/* A runtime's log on a full state disk (runlog.c): a real file on a small
 * tmpfs, in a private mount namespace, filled by the test. Output that cannot
 * be written is dropped (the pipe keeps draining), and the first write with
 * room again says in the log how much was lost and why. Needs root (mount);
 * skipped without it. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>

#include "supervisor/runlog.h"

static bool in_namespace;

static void fill(const char *path)
{
	static const char zeros[4096];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	while (write(fd, zeros, sizeof(zeros)) == (ssize_t)sizeof(zeros))
		;
	while (write(fd, zeros, 1) == 1)
		;
	assert_int_equal(errno, ENOSPC);
	close(fd);
}

static void read_all(const char *path, char *out, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	assert_true(fd >= 0);
	n = read(fd, out, len - 1);
	assert_true(n >= 0);
	out[n] = '\0';
	close(fd);
}

static void test_full_disk_drops_output_and_says_so(void **state)
{
	static const char rest[] = "[labd: 60 bytes of output dropped: No space left on device]\n"
				   "after\n";
	char dir[64], path[128], filler[128], page[4096], text[8192];
	struct runlog l;

	(void)state;
	if (!in_namespace)
		skip();
	unit_tempdir(dir);
	assert_int_equal(mount("labd-unit-runlog", dir, "tmpfs", 0, "size=256k"), 0);
	snprintf(path, sizeof(path), "%s/jupyter.log", dir);
	snprintf(filler, sizeof(filler), "%s/filler", dir);
	runlog_init(&l, -1, path, 1 << 20, getgid());

	/* one whole page: the next byte needs a block the full disk does not have */
	memset(page, 'b', sizeof(page));
	runlog_write(&l, page, sizeof(page));
	fill(filler);
	for (int i = 0; i < 3; i++)
		runlog_write(&l, "lost on a full disk\n", 20);
	assert_int_equal(unlink(filler), 0);
	runlog_write(&l, "after\n", 6);
	runlog_release(&l);

	read_all(path, text, sizeof(text));
	assert_memory_equal(text, page, sizeof(page));
	assert_string_equal(text + sizeof(page), rest);

	umount2(dir, MNT_DETACH);
	unit_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_disk_drops_output_and_says_so),
	};
	/* a private mount namespace: the tmpfs goes with this process */
	in_namespace = unshare(CLONE_NEWNS) == 0 &&
		       mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
