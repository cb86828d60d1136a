/* test_homeguard.c - one writer per home image across state dirs that share the
 * image's folder ([storage] home_images; sandbox/homeguard.h). Two state dirs on this
 * machine stand in for two nodes: the second mount of a home is refused at once,
 * with the reason, while the first holds it, and goes through after its unmount; an
 * image held by another machine's lock (an OFD lock of the test's own) is refused the
 * same way, also for offline growth; [storage] mmp gives the image ext4's
 * multiple-mount protection. Root only (loop devices); skipped otherwise. */
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
#include <unistd.h>

#include "sandbox/fail.h"
#include "sandbox/home.h"
#include "sandbox/homeguard.h"

#define OWNER 200011
#define SIZE (32ull << 20)

static char top[256], node_a[300], node_b[300], image[300];
static char why[512];

static int setup(void **st)
{
	(void)st;
	if (geteuid() != 0)
		return 0;
	snprintf(top, sizeof(top), "/tmp/labd-homeguard-XXXXXX");
	if (!mkdtemp(top))
		return -1;
	snprintf(node_a, sizeof(node_a), "%s/a", top);
	snprintf(node_b, sizeof(node_b), "%s/b", top);
	snprintf(image, sizeof(image), "%s/shared/11.img", top);
	if (mkdir(node_a, 0700) < 0 || mkdir(node_b, 0700) < 0)
		return -1;
	return home_ensure(image, SIZE, OWNER);
}

static int teardown(void **st)
{
	char cmd[600];

	(void)st;
	if (geteuid() != 0)
		return 0;
	home_unref(node_a, "11", "box-a");
	home_unref(node_b, "11", "box-b");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	return system(cmd) == 0 ? 0 : -1;
}

/* home_mount_ref with its failure text held in why. */
static int mount_ref(const char *state, const char *holder)
{
	int rc;

	fail_hold(why, sizeof(why));
	rc = home_mount_ref(state, "11", image, holder);
	fail_release();
	return rc;
}

static void test_second_node_is_refused_while_the_first_holds_it(void **st)
{
	(void)st;
	if (geteuid() != 0)
		skip();
	assert_int_equal(mount_ref(node_a, "box-a"), 0);
	assert_true(home_mounted(node_a, "11"));
	/* node b finds node a's loop device attached: not its own, refused at once */
	assert_int_equal(mount_ref(node_b, "box-b"), -1);
	assert_non_null(strstr(why, HOMEGUARD_ELSEWHERE));
	assert_false(home_mounted(node_b, "11"));
	/* nor grown offline behind node a's back */
	fail_hold(why, sizeof(why));
	assert_int_equal(home_grow(node_b, "11", image, SIZE * 2), -1);
	fail_release();
	assert_non_null(strstr(why, HOMEGUARD_ELSEWHERE));
	/* node a's own second sandbox shares its mount */
	assert_int_equal(mount_ref(node_a, "box-a2"), 0);
	assert_int_equal(home_unref(node_a, "11", "box-a2"), 0);
	assert_true(home_mounted(node_a, "11"));
	/* after node a's unmount, node b mounts it */
	assert_int_equal(home_unref(node_a, "11", "box-a"), 0);
	assert_false(home_mounted(node_a, "11"));
	assert_int_equal(mount_ref(node_b, "box-b"), 0);
	assert_true(home_mounted(node_b, "11"));
	assert_int_equal(mount_ref(node_a, "box-a"), -1);
	assert_non_null(strstr(why, HOMEGUARD_ELSEWHERE));
	assert_int_equal(home_unref(node_b, "11", "box-b"), 0);
	assert_false(home_mounted(node_b, "11"));
}

static void test_an_image_locked_elsewhere_is_refused_fast(void **st)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	struct stat sb;
	int fd;

	(void)st;
	if (geteuid() != 0)
		skip();
	/* another machine's node holds the image (its loop device's lock) */
	fd = open(image, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fcntl(fd, F_OFD_SETLK, &fl), 0);
	assert_int_equal(mount_ref(node_a, "box-a"), -1);
	assert_non_null(strstr(why, HOMEGUARD_ELSEWHERE));
	assert_false(home_mounted(node_a, "11"));
	fail_hold(why, sizeof(why));
	assert_int_equal(home_grow(node_a, "11", image, SIZE * 2), -1);
	fail_release();
	assert_non_null(strstr(why, HOMEGUARD_ELSEWHERE));
	assert_int_equal(stat(image, &sb), 0);
	assert_int_equal((uint64_t)sb.st_size, SIZE); /* untouched */
	close(fd);
	/* the other machine let go */
	assert_int_equal(mount_ref(node_a, "box-a"), 0);
	assert_int_equal(home_unref(node_a, "11", "box-a"), 0);
}

static void test_mmp_is_added_to_an_unmounted_image(void **st)
{
	(void)st;
	if (geteuid() != 0)
		skip();
	assert_false(homeguard_has_mmp(image));
	assert_int_equal(homeguard_mmp(image, true), 0); /* attached: left for later */
	assert_false(homeguard_has_mmp(image));
	assert_int_equal(homeguard_mmp(image, false), 0);
	assert_true(homeguard_has_mmp(image));
	/* and mounts with it, guarded as before */
	assert_int_equal(mount_ref(node_a, "box-a"), 0);
	assert_int_equal(mount_ref(node_b, "box-b"), -1);
	assert_non_null(strstr(why, HOMEGUARD_ELSEWHERE));
	assert_int_equal(home_unref(node_a, "11", "box-a"), 0);
	assert_int_equal(home_fsck(image), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_second_node_is_refused_while_the_first_holds_it),
		cmocka_unit_test(test_an_image_locked_elsewhere_is_refused_fast),
		cmocka_unit_test(test_mmp_is_added_to_an_unmounted_image),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
