/* test_usage.c - sandbox_usage on a live sandbox (CPU time moves under a burner, the
 * limit is the spec's, an OOM kill is counted) and cgbox_usage on fake v1 and v2 trees
 * (the parsing of each file).  The live cases need root (tests/security/run.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>

#include "boxsh.h"
#include "sandbox/cgbox.h"

static char out[8192];

/* io.pressure per cgroup exists on v2 and on hybrid hosts (the unified tree) */
static bool host_has_psi_per_cgroup(void)
{
	struct statfs f;
	return (statfs("/sys/fs/cgroup", &f) == 0 && f.f_type == CGROUP2_SUPER_MAGIC) ||
	       (statfs("/sys/fs/cgroup/unified", &f) == 0 && f.f_type == CGROUP2_SUPER_MAGIC &&
		access("/proc/pressure/io", R_OK) == 0);
}

static void test_live_counters(void **st)
{
	struct sandbox_spec s;
	struct sandbox_usage u0, u1, u2;
	struct boxsh b;

	(void)st;
	if (!boxsh_can_start())
		skip();
	boxsh_spec(&s, "counter", 12);
	s.mem_bytes = 64ull << 20;
	assert_int_equal(boxsh_start(&b, &s), 0);
	assert_int_equal(boxsh_run(&b, "true", out, sizeof(out)), 0);
	assert_int_equal(sandbox_usage(&b.h, &u0), 0);
	assert_int_equal(u0.memory_limit_bytes, 64ll << 20);
	assert_true(u0.memory_bytes > 0 && u0.memory_bytes < (64ll << 20));
	assert_true(u0.cpu_usage_us >= 0);
	assert_int_equal(u0.oom_kills, 0);
	if (host_has_psi_per_cgroup())
		assert_true(u0.io_wait_us >= 0);
	else
		assert_int_equal(u0.io_wait_us, -1);
	/* about half a second of shell arithmetic */
	assert_int_equal(boxsh_run(&b, "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done", out, sizeof(out)), 0);
	assert_int_equal(sandbox_usage(&b.h, &u1), 0);
	assert_true(u1.cpu_usage_us - u0.cpu_usage_us > 100000);
	assert_int_equal(u1.oom_kills, 0);
	/* dd fills a 256 MiB buffer against a 64 MiB limit */
	assert_int_not_equal(boxsh_run(&b, "dd if=/dev/zero of=/dev/null bs=256M count=1", out, sizeof(out)), 0);
	assert_int_equal(sandbox_usage(&b.h, &u2), 0);
	assert_true(u2.oom_kills >= 1);
	boxsh_stop(&b);
	/* gone: the cgroups are removed */
	assert_int_equal(sandbox_usage(&b.h, &u2), -1);
	assert_int_equal(u2.cpu_usage_us, -1);
}

static char tmpl[] = "/tmp/labd-usage-XXXXXX";

static void put(const char *dir, const char *file, const char *text)
{
	char path[600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

static void test_fake_v2(void **st)
{
	struct cgbox_layout lo;
	struct cgbox_usage u;
	char dir[600];

	(void)st;
	memset(&lo, 0, sizeof(lo));
	lo.mode = CGBOX_V2;
	snprintf(lo.v2, sizeof(lo.v2), "%s/v2", tmpl);
	snprintf(dir, sizeof(dir), "%s/v2", tmpl);
	mkdir(dir, 0755);
	snprintf(dir, sizeof(dir), "%s/v2/p", tmpl);
	mkdir(dir, 0755);
	snprintf(dir, sizeof(dir), "%s/v2/p/b", tmpl);
	mkdir(dir, 0755);
	assert_int_equal(cgbox_usage(&lo, "p", "b", &u), -1); /* no memory.current */
	put(dir, "memory.current", "1048576\n");
	put(dir, "memory.max", "max\n");
	put(dir, "cpu.stat", "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n");
	put(dir, "io.pressure", "some avg10=1.00 avg60=0.50 avg300=0.10 total=777\n"
				"full avg10=0.00 avg60=0.00 avg300=0.00 total=111\n");
	put(dir, "memory.events", "low 0\nhigh 0\nmax 5\noom 2\noom_kill 1\noom_group_kill 0\n");
	assert_int_equal(cgbox_usage(&lo, "p", "b", &u), 0);
	assert_int_equal(u.memory_bytes, 1048576);
	assert_int_equal(u.memory_limit_bytes, 0);
	assert_int_equal(u.cpu_usage_us, 2500000);
	assert_int_equal(u.io_wait_us, 777);
	assert_int_equal(u.oom_kills, 1);
	put(dir, "memory.max", "67108864\n");
	{
		char path[700];
		snprintf(path, sizeof(path), "%s/io.pressure", dir);
		unlink(path); /* PSI off (psi=0): unknown */
	}
	assert_int_equal(cgbox_usage(&lo, "p", "b", &u), 0);
	assert_int_equal(u.memory_limit_bytes, 67108864);
	assert_int_equal(u.io_wait_us, -1);
}

static void test_fake_v1(void **st)
{
	struct cgbox_layout lo;
	struct cgbox_usage u;
	char dir[600];

	(void)st;
	memset(&lo, 0, sizeof(lo));
	lo.mode = CGBOX_V1;
	for (int c = 0; c < CGBOX_NCTL; c++) {
		if (c == CGBOX_UNIFIED)
			continue; /* a pure v1 host first */
		snprintf(lo.v1[c], sizeof(lo.v1[c]), "%s/v1-%s", tmpl, cgbox_ctl_name(c));
		mkdir(lo.v1[c], 0755);
		snprintf(dir, sizeof(dir), "%s/p", lo.v1[c]);
		mkdir(dir, 0755);
		snprintf(dir, sizeof(dir), "%s/p/b", lo.v1[c]);
		mkdir(dir, 0755);
	}
	snprintf(dir, sizeof(dir), "%s/p/b", lo.v1[CGBOX_MEMORY]);
	put(dir, "memory.usage_in_bytes", "4096\n");
	put(dir, "memory.limit_in_bytes", "9223372036854771712\n");
	put(dir, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
	put(dir, "memory.failcnt", "99\n"); /* limit hits, not kills: never read */
	snprintf(dir, sizeof(dir), "%s/p/b", lo.v1[CGBOX_CPUACCT]);
	put(dir, "cpuacct.usage", "1500000000\n");
	assert_int_equal(cgbox_usage(&lo, "p", "b", &u), 0);
	assert_int_equal(u.memory_bytes, 4096);
	assert_int_equal(u.memory_limit_bytes, 0);
	assert_int_equal(u.oom_kills, 3);
	assert_int_equal(u.cpu_usage_us, 1500000);
	assert_int_equal(u.io_wait_us, -1);
	/* hybrid: the unified tree gives the I/O pressure */
	snprintf(lo.v1[CGBOX_UNIFIED], sizeof(lo.v1[0]), "%s/unified", tmpl);
	snprintf(dir, sizeof(dir), "%s/unified", tmpl);
	mkdir(dir, 0755);
	snprintf(dir, sizeof(dir), "%s/unified/p", tmpl);
	mkdir(dir, 0755);
	snprintf(dir, sizeof(dir), "%s/unified/p/b", tmpl);
	mkdir(dir, 0755);
	put(dir, "io.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=42\n");
	assert_int_equal(cgbox_usage(&lo, "p", "b", &u), 0);
	assert_int_equal(u.io_wait_us, 42);
}

static int setup(void **st)
{
	(void)st;
	return mkdtemp(tmpl) ? 0 : -1;
}

static int teardown(void **st)
{
	char cmd[128];
	(void)st;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpl);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fake_v2),
		cmocka_unit_test(test_fake_v1),
		cmocka_unit_test(test_live_counters),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
