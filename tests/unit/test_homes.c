/* test_homes.c - where home images live (supervisor/homes.c): <state>/homes by default,
 * [storage] home_images when set (shared storage on the nodes of a cluster); a moved
 * old-layout image, a deleted user's archive and the archive sweep follow the images
 * there, and leave the state dir's own folders alone. */
#include "unit.h"

#include <sys/stat.h>
#include <time.h>

#include "config/config.h"
#include "supervisor/homes.h"

static char dir[64], state[128], shared[128];
static struct labd_config cfg;

static int setup(void **st)
{
	char path[256];

	(void)st;
	unit_tempdir(dir);
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(shared, sizeof(shared), "%s/shared", dir);
	const char *const sub[] = {"", "/homes", "/archive"};
	for (size_t i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s%s", state, sub[i]);
		assert_int_equal(mkdir(path, 0700), 0);
	}
	assert_int_equal(mkdir(shared, 0700), 0);
	config_defaults(&cfg, false);
	return 0;
}

static int teardown(void **st)
{
	(void)st;
	unit_rmdir(dir);
	return 0;
}

static bool exists(const char *d, const char *name)
{
	char path[256];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/%s", d, name);
	return stat(path, &sb) == 0;
}

static void touch(const char *d, const char *name)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", d, name);
	assert_non_null(f = fopen(path, "w"));
	fclose(f);
}

static void test_image_path_follows_home_images(void **st)
{
	char out[600], want[300];

	(void)st;
	cfg.home_images[0] = '\0';
	homes_image_path(&cfg, state, 42, out, sizeof(out));
	snprintf(want, sizeof(want), "%s/homes/42.img", state);
	assert_string_equal(out, want);
	snprintf(cfg.home_images, sizeof(cfg.home_images), "%s", shared);
	homes_image_path(&cfg, state, 42, out, sizeof(out));
	snprintf(want, sizeof(want), "%s/42.img", shared);
	assert_string_equal(out, want);
	homes_dir(&cfg, state, out, sizeof(out));
	assert_string_equal(out, shared);
}

static void test_adopt_retire_and_sweep_in_home_images(void **st)
{
	char archive[160];

	(void)st;
	snprintf(cfg.home_images, sizeof(cfg.home_images), "%s", shared);
	snprintf(cfg.deleted_home, sizeof(cfg.deleted_home), "archive");
	/* an old-layout image (by name) moves to its id, in the shared folder */
	touch(shared, "alice.img");
	assert_int_equal(homes_adopt_named(&cfg, state, "alice", 7), 0);
	assert_true(exists(shared, "7.img") && !exists(shared, "alice.img"));
	/* deleted: archived beside the images, not into the state dir */
	assert_int_equal(homes_retire(&cfg, state, "alice", 7), 0);
	assert_false(exists(shared, "7.img"));
	snprintf(archive, sizeof(archive), "%s/archive", shared);
	int found = 0;
	for (int dt = -2; dt <= 2 && !found; dt++) {
		char name[64];
		snprintf(name, sizeof(name), "7-alice-%lld.img", (long long)time(NULL) + dt);
		found = exists(archive, name);
	}
	assert_true(found);
	/* the state dir's own image of another user is none of this */
	touch(state, "homes/8.img");
	assert_int_equal(homes_retire(&cfg, state, "bob", 8), 0);
	assert_true(exists(state, "homes/8.img"));
	/* the sweep removes expired archives from the shared archive */
	assert_int_equal(homes_sweep(&cfg, state, 0, (int64_t)time(NULL) + 10), 1);
	assert_int_equal(homes_sweep(&cfg, state, 0, (int64_t)time(NULL) + 10), 0);
	/* with no home_images, the state dir's homes as before */
	cfg.home_images[0] = '\0';
	assert_int_equal(homes_retire(&cfg, state, "bob", 8), 0);
	assert_false(exists(state, "homes/8.img"));
	assert_int_equal(homes_sweep(&cfg, state, 0, (int64_t)time(NULL) + 10), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_image_path_follows_home_images),
		cmocka_unit_test(test_adopt_retire_and_sweep_in_home_images),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
