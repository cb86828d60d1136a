/* test_parse.c - sandbox option parsers and state files (pure logic). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "labd/parse.h"
#include "sandbox/parse.h"
#include "sandbox/state.h"

static void test_gpus_net(void **st)
{
	struct sandbox_spec s;
	enum sandbox_net n;
	uint64_t v;
	uint32_t m;
	(void)st;
	memset(&s, 0, sizeof(s));
	assert_int_equal(sandbox_parse_gpus("1,3", &s), 0);
	assert_int_equal(s.n_gpus, 2);
	assert_int_equal(s.gpus[0], 1);
	assert_int_equal(s.gpus[1], 3);
	assert_int_equal(sandbox_parse_gpus("1,1", &s), -1);
	assert_int_equal(sandbox_parse_gpus("1,", &s), -1);
	assert_int_equal(sandbox_parse_gpus("256", &s), -1);
	assert_int_equal(sandbox_parse_gpus("a", &s), -1);
	/* the device ids' text forms (labd/gpudev.h): a MIG instance, a share */
	assert_int_equal(sandbox_parse_gpus("0/gi1/ci0,2/share3,0/gi2/ci0", &s), 0);
	assert_int_equal(s.n_gpus, 3);
	assert_int_equal(s.gpus[0], 0x10000u | 1u << 3);
	assert_int_equal(s.gpus[1], 0x20000u | 2u << 8 | 3u);
	assert_int_equal(sandbox_parse_gpus("0/gi1/ci0,0", &s), -1); /* with its card */
	assert_int_equal(sandbox_parse_gpus("0/gi1/ci0,0/gi1/ci0", &s), -1);
	assert_int_equal(sandbox_parse_gpus("0/gi1", &s), -1);
	assert_int_equal(sandbox_parse_gpus(",0", &s), -1);
	assert_int_equal(sandbox_parse_gpus("0,,1", &s), -1);
	char uuids[] = "MIG-0a1b-2c3d,GPU-ffee", bad[] = "MIG-xyz";
	assert_int_equal(sandbox_parse_gpu_uuids(uuids, &s), 0);
	assert_string_equal(s.gpu_uuids[0], "MIG-0a1b-2c3d");
	assert_string_equal(s.gpu_uuids[1], "GPU-ffee");
	assert_int_equal(sandbox_parse_gpu_uuids(bad, &s), -1);
	assert_int_equal(sandbox_parse_net("none", &n), 0);
	assert_int_equal(n, SANDBOX_NET_NONE);
	assert_int_equal(sandbox_parse_net("egress", &n), 0);
	assert_int_equal(n, SANDBOX_NET_EGRESS);
	assert_int_equal(sandbox_parse_net("host", &n), -1);
	/* The sandbox takes user names, sizes and CPU counts through labd/parse.h,
	 * the server's rules (tests/unit/test_parse.c); these are the ones that
	 * used to differ. */
	assert_true(parse_user_name_ok("alice"));
	assert_false(parse_user_name_ok("_svc-1")); /* was accepted by the sandbox alone */
	assert_false(parse_user_name_ok("abcdefghijklmnopqrstuvwxyzabcdefg")); /* 33 */
	assert_int_equal(parse_size_bytes("4MiB", &v), 0);
	assert_int_equal(v, 4ull << 20);
	assert_int_equal(parse_cpus_milli("0.5", &m), 0);
	assert_int_equal(m, 500);
	assert_int_equal(parse_cpus_milli("1e3", &m), -EINVAL);
}

/* spec.ro_binds: absolute, canonical, never "/" nor the state dir or below it. */
static void test_ro_binds_checked(void **st)
{
	static const char *const bad[] = {"/", "opt/x", "/opt/../etc", "/opt//x", "/opt/./x",
					  "/var/lib/labd", "/var/lib/labd/homes"};
	char *const argv[] = {"true", NULL};
	struct sandbox_spec s;
	(void)st;
	sandbox_spec_init(&s);
	s.user = "alice";
	s.user_id = 7;
	s.argv = argv;
	assert_int_equal(sandbox_spec_check(&s), 0);
	s.ro_binds[s.n_ro_binds++] = "/opt/labd/jupyter";
	assert_int_equal(sandbox_spec_check(&s), 0);
	s.ro_binds[0] = "/var/lib/labdx"; /* beside the state dir, not in it */
	assert_int_equal(sandbox_spec_check(&s), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		s.ro_binds[0] = bad[i];
		assert_int_equal(sandbox_spec_check(&s), -1);
	}
	s.ro_binds[0] = "/opt/labd/jupyter";
	s.n_ro_binds = SANDBOX_MAX_RO_BINDS + 1;
	assert_int_equal(sandbox_spec_check(&s), -1);
}

/* spec.binds: both paths canonical; the source may lie in the state dir (a pool's
 * layout), the target may not. */
static void test_binds_checked(void **st)
{
	static const char *const bad[] = {"/", "opt/x", "/opt/../etc", "/opt/..", "/opt//x", "/opt/./x",
					  "/opt/x/", "/opt/.", NULL};
	char *const argv[] = {"true", NULL};
	struct sandbox_spec s;
	(void)st;
	sandbox_spec_init(&s);
	s.user = "alice";
	s.user_id = 7;
	s.argv = argv;
	s.binds[s.n_binds++] = (struct sandbox_bind){"/var/lib/labd/pools/3/ml", "/opt/ml", true};
	s.binds[s.n_binds++] = (struct sandbox_bind){"/srv/build/libexec", "/opt/labd/libexec", false};
	assert_int_equal(sandbox_spec_check(&s), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		s.binds[1].src = bad[i];
		assert_int_equal(sandbox_spec_check(&s), -1);
		s.binds[1].src = "/srv/build/libexec";
		s.binds[1].dst = bad[i];
		assert_int_equal(sandbox_spec_check(&s), -1);
		s.binds[1].dst = "/opt/labd/libexec";
	}
	s.binds[1].dst = "/var/lib/labd/x"; /* masked inside: never a target */
	assert_int_equal(sandbox_spec_check(&s), -1);
	s.binds[1].dst = "/var/lib/labdx";
	assert_int_equal(sandbox_spec_check(&s), 0);
	s.n_binds = SANDBOX_MAX_BINDS + 1;
	assert_int_equal(sandbox_spec_check(&s), -1);
}

static void test_state_roundtrip(void **st)
{
	struct sandbox_state a, b;
	char buf[16384];
	int n;
	(void)st;
	memset(&a, 0, sizeof(a));
	snprintf(a.id, sizeof(a.id), "alice-0123456789ab");
	snprintf(a.user, sizeof(a.user), "alice");
	a.pid = 4242;
	a.start_time_ticks = 123456789;
	snprintf(a.home_image, sizeof(a.home_image), "/var/lib/labd/homes/7.img");
	snprintf(a.home_key, sizeof(a.home_key), "7");
	snprintf(a.cgroup_parent, sizeof(a.cgroup_parent), "labd");
	n = sandbox_state_format(&a, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(sandbox_state_parse(buf, (size_t)n, &b), 0);
	assert_string_equal(b.id, a.id);
	assert_string_equal(b.user, "alice");
	assert_string_equal(b.home_key, "7"); /* its home is mounted by id */
	assert_int_equal(b.pid, 4242);
	assert_int_equal(b.start_time_ticks, 123456789);
	assert_string_equal(b.home_image, a.home_image);
	assert_string_equal(b.run_dir, "");
	/* torn write: the last line lacks its newline */
	assert_int_equal(sandbox_state_parse(buf, (size_t)n - 1, &b), -1);
	assert_int_equal(sandbox_state_format(&a, buf, 20), -1);
}

/* A state file of the release before has no home_key: it mounted the home by
 * user name, and its teardown must unmount it there. */
static void test_state_without_home_key_means_the_name(void **st)
{
	const char *old = "version=1\nid=alice-0123456789ab\nuser=alice\npid=1\nstart_time=1\n"
			  "home_image=/var/lib/labd/homes/7.img\nrun_dir=\ncgroup_parent=labd\n";
	struct sandbox_state b;
	(void)st;
	assert_int_equal(sandbox_state_parse(old, strlen(old), &b), 0);
	assert_string_equal(b.home_key, "alice");
}

static void test_state_rejects(void **st)
{
	struct sandbox_state b;
	const char *bad[] = {
		"id=a\nuser=u\ncgroup_parent=labd\n",                          /* no version */
		"version=2\nid=a\nuser=u\ncgroup_parent=labd\n",               /* unknown version */
		"version=1\nid=a\nuser=u\ncgroup_parent=labd\nfoo=1\n",        /* unknown key */
		"version=1\nid=../x\nuser=u\ncgroup_parent=labd\n",            /* path in id */
		"version=1\nid=a/b\nuser=u\ncgroup_parent=labd\n",
		"version=1\nid=a\nuser=u\ncgroup_parent=labd\npid=-1\n",       /* negative pid */
		"version=1\nid=a\nuser=u\ncgroup_parent=labd\npid=99999999\n", /* out of range */
		"version=1\nid=a\nuser=u\ncgroup_parent=labd\nstart_time=1x\n",
		"version=1\nid=a\nuser=u\n",                                   /* no cgroup parent */
		"version=1\nnoequals\n",
		"version=1\nid=a\nuser=../x\ncgroup_parent=labd\n",           /* user as a path */
		"version=1\nid=a\nuser=.x\ncgroup_parent=labd\n",
		"version=1\nid=a\nuser=u\nhome_key=../7\ncgroup_parent=labd\n", /* key as a path */
		"version=1\nid=a\nuser=u\nhome_key=..\ncgroup_parent=labd\n",
	};
	(void)st;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(sandbox_state_parse(bad[i], strlen(bad[i]), &b), -1);
	{
		char big[600];
		memset(big, 'a', sizeof(big));
		memcpy(big, "version=1\nid=", 13);
		big[sizeof(big) - 1] = '\n';
		assert_int_equal(sandbox_state_parse(big, sizeof(big), &b), -1); /* id too long */
	}
}

/* Paths read back from a state file must stay under the state dir. */
static void test_path_under(void **st)
{
	static const char *const inside[] = {"/s/runtimes/alice/run", "/s/homes/7.img", "/s/x"};
	static const char *const outside[] = {
		"/s", "/s/", "/sx/run", "/tmp/x", "/s/../etc", "/s/runtimes/../../etc", "/s//x",
		"/s/./x", "/s/x/", "/s/x/..", "s/x", "",
	};

	(void)st;
	for (size_t i = 0; i < sizeof(inside) / sizeof(inside[0]); i++)
		assert_true(sandbox_state_path_under("/s", inside[i]));
	for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++)
		assert_false(sandbox_state_path_under("/s", outside[i]));
	assert_false(sandbox_state_path_under("", "/x"));
}

static void test_stat_field(void **st)
{
	static const char line[] = "7 (a b) c) R 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4242 9\n";
	uint64_t v;

	(void)st;
	assert_int_equal(sandbox_parse_stat_field(line, 4, &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(sandbox_parse_stat_field(line, 22, &v), 0);
	assert_int_equal(v, 4242);
	assert_int_equal(sandbox_parse_stat_field(line, 23, &v), 0);
	assert_int_equal(v, 9);
	assert_int_equal(sandbox_parse_stat_field(line, 3, &v), -1);  /* "R" is no number */
	assert_int_equal(sandbox_parse_stat_field(line, 8, &v), -1);  /* -1 neither */
	assert_int_equal(sandbox_parse_stat_field(line, 24, &v), -1); /* past the end */
	assert_int_equal(sandbox_parse_stat_field(line, 2, &v), -1);
	assert_int_equal(sandbox_parse_stat_field("no comm 1 2 3", 3, &v), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gpus_net),
		cmocka_unit_test(test_ro_binds_checked),
		cmocka_unit_test(test_binds_checked),
		cmocka_unit_test(test_stat_field),
		cmocka_unit_test(test_state_roundtrip),
		cmocka_unit_test(test_state_without_home_key_means_the_name),
		cmocka_unit_test(test_state_rejects),
		cmocka_unit_test(test_path_under),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
