/* Unit tests of the sandbox uid range's base (supervisor/uidmap.c): uid_base = auto
 * picks the first multiple of 65536 above every account, subordinate range and the
 * ranges useradd hands out, from files the test writes (Debian's second login account
 * gets 165536-231071, inside the former default 200000); the base settled at start is
 * the recorded one, the former default for an install from before auto, or an explicit
 * one; and the record keeps it when the host's files change later. */
#include "unit.h"

#include <errno.h>
#include <jansson.h>
#include <sys/stat.h>

#include "config/config.h"
#include "supervisor/uidmap.h"

#define PASSWD "root:x:0:0:root:/root:/bin/sh\n"                                            \
	       "alice:x:1000:1000::/home/alice:/bin/sh\n"                                  \
	       "bob:x:1001:1001::/home/bob:/bin/sh\n"                                      \
	       "nobody:x:65534:65534::/nonexistent:/usr/sbin/nologin\n"
/* what useradd gives two login accounts on Debian 12 */
#define SUBUID "alice:100000:65536\nbob:165536:65536\n"
#define DEFS "# login.defs\nSUB_UID_MIN 100000\nSUB_UID_MAX 600100000\nSUB_GID_MAX 600100000\n"

static char dir[64];
static char passwd[128], subuid[128], subgid[128], defs[128];

static int setup(void **state)
{
	(void)state;
	unit_tempdir(dir);
	unit_write(dir, "passwd", PASSWD, passwd);
	unit_write(dir, "subuid", SUBUID, subuid);
	unit_write(dir, "subgid", SUBUID, subgid);
	unit_write(dir, "login.defs", DEFS, defs);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unit_rmdir(dir);
	return 0;
}

static unsigned pick(void)
{
	const struct uidmap_host_files hf = {passwd, subuid, subgid, defs};
	unsigned base = 0;

	assert_int_equal(uidmap_auto_base(&hf, 65536, &base), 0);
	return base;
}

static void test_auto_base_clears_every_range(void **state)
{
	char p[128];

	(void)state;
	/* above useradd's SUB_UID_MAX: the next account added lands below labd's range */
	assert_int_equal(pick(), 9157u * 65536); /* 600113152 */
	assert_true(pick() > 231071 && pick() % 65536 == 0);
	/* a range handed out by hand above that, in subgid only */
	unit_write(dir, "subgid", SUBUID "carol:700000000:65536\n", p);
	assert_int_equal(pick(), 10683u * 65536); /* first block at or above 700065536 */
	/* an account's uid above that; nfsnobody's top block is no account to clear */
	unit_write(dir, "passwd", PASSWD "svc:x:800000000:1::/:/bin/sh\n"
					 "nfsnobody:x:4294967294:4294967294::/:/bin/sh\n", p);
	assert_int_equal(pick(), 12208u * 65536); /* above 800000000 */
	/* a login.defs that lets useradd go higher */
	unit_write(dir, "login.defs", "SUB_UID_MAX 900000000\n", p);
	assert_int_equal(pick(), 13733u * 65536); /* 900005888: the first block above 9e8 */
	unit_write(dir, "passwd", PASSWD, p);
	unit_write(dir, "subgid", SUBUID, p);
	unit_write(dir, "login.defs", DEFS, p);
}

static void test_auto_base_refusals(void **state)
{
	const struct uidmap_host_files none = {"/nonexistent/passwd", subuid, subgid, defs};
	const struct uidmap_host_files full = {passwd, subuid, subgid, defs};
	unsigned base = 7;
	char p[128];

	(void)state;
	assert_int_equal(uidmap_auto_base(&none, 65536, &base), -EIO);
	unit_write(dir, "subuid", "x:4294000000:900000\n", p);
	assert_int_equal(uidmap_auto_base(&full, 65536, &base), -ERANGE);
	assert_int_equal(base, 7); /* untouched */
	/* no subordinate files and no login.defs: shadow's own maximum still counts */
	const struct uidmap_host_files bare = {passwd, "/nonexistent/a", "/nonexistent/b",
					       "/nonexistent/c"};
	assert_int_equal(uidmap_auto_base(&bare, 65536, &base), 0);
	assert_int_equal(base, 9157u * 65536);
	unit_write(dir, "subuid", SUBUID, p);
}

static void config_in(struct labd_config *cfg, const char *state)
{
	config_defaults(cfg, false);
	snprintf(cfg->state_dir, sizeof(cfg->state_dir), "%s", state);
	snprintf(cfg->subuid_file, sizeof(cfg->subuid_file), "%s", subuid);
	snprintf(cfg->subgid_file, sizeof(cfg->subgid_file), "%s", subgid);
}

static unsigned settle(const char *state)
{
	struct labd_config cfg;
	char err[256] = "";

	config_in(&cfg, state);
	assert_int_equal(cfg.uid_base, 0); /* the default is auto */
	assert_int_equal(uidmap_settle_base(&cfg, err, sizeof(err)), 0);
	return cfg.uid_base;
}

static void test_settled_base_is_chosen_once(void **state)
{
	char st[80], p[128], path[160];
	struct labd_config cfg;
	struct uidmap *m;
	json_t *j;

	(void)state;
	snprintf(st, sizeof(st), "%s/state", dir);
	assert_int_equal(mkdir(st, 0700), 0);
	/* a subordinate range above every host's login.defs: the choice is clear of it */
	unit_write(dir, "subuid", SUBUID "high:1900000000:65536\n", p);
	unsigned base = settle(st);
	assert_true(base >= 1900065536u && base % 65536 == 0 && base - 1900065536u < 65536);
	/* the supervisor's record keeps it ... */
	config_in(&cfg, st);
	cfg.uid_base = base;
	assert_non_null(m = uidmap_new(&cfg, st));
	uidmap_free(m);
	snprintf(path, sizeof(path), "%s/uids.json", st);
	assert_non_null(j = json_load_file(path, 0, NULL));
	assert_int_equal(json_integer_value(json_object_get(j, "uid_base")), base);
	json_decref(j);
	/* ... so that it never moves when the host's ranges change under existing homes */
	unit_write(dir, "subuid", SUBUID, p);
	assert_int_equal(settle(st), base);
	/* an explicit base stays as configured */
	config_in(&cfg, st);
	cfg.uid_base = 300000;
	assert_int_equal(uidmap_settle_base(&cfg, p, sizeof(p)), 0);
	assert_int_equal(cfg.uid_base, 300000);
	unit_rmdir(st);
}

static void test_install_from_before_auto_keeps_200000(void **state)
{
	char st[80], p[128], homes[96];

	(void)state;
	snprintf(st, sizeof(st), "%s/old", dir);
	assert_int_equal(mkdir(st, 0700), 0);
	/* the record of a former release: names, no base */
	unit_write(st, "uids.json", "{\"names\":{\"ann\":200001},\"retired\":[]}", p);
	assert_int_equal(settle(st), 200000);
	assert_int_equal(unlink(p), 0);
	/* homes but no record yet */
	snprintf(homes, sizeof(homes), "%s/homes", st);
	assert_int_equal(mkdir(homes, 0700), 0);
	unit_write(homes, "1.img", "", p);
	assert_int_equal(settle(st), 200000);
	/* a fresh state dir: auto */
	assert_int_equal(unlink(p), 0);
	assert_int_not_equal(settle(st), 200000);
	/* an unreadable record stops the start rather than guessing */
	unit_write(st, "uids.json", "{not json", p);
	struct labd_config cfg;
	char err[256] = "";
	config_in(&cfg, st);
	assert_int_equal(uidmap_settle_base(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "uids.json cannot be read"));
	unit_rmdir(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auto_base_clears_every_range),
		cmocka_unit_test(test_auto_base_refusals),
		cmocka_unit_test(test_settled_base_is_chosen_once),
		cmocka_unit_test(test_install_from_before_auto_keeps_200000),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
