/* test_cgroup.c - the cgroup code against fake v2 and v1 trees in a temp dir, the v2
 * device program's shape, and (as root, where a cgroup2 hierarchy is mounted, also on
 * hybrid hosts at /sys/fs/cgroup/unified) the program attached to a real cgroup. */
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
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/cgbox.h"
#include "sandbox/cgbpf.h"

static char tmpl[64];

static int setup(void **st)
{
	(void)st;
	snprintf(tmpl, sizeof(tmpl), "/tmp/labd-cg-test.XXXXXX");
	return mkdtemp(tmpl) ? 0 : -1;
}

static int teardown(void **st)
{
	char cmd[128];
	(void)st;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpl);
	return system(cmd) == 0 ? 0 : -1;
}

static void slurp(const char *dir, const char *file, char *buf, size_t size)
{
	char path[512];
	FILE *f;
	size_t n;
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "r");
	assert_non_null(f);
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
}

static void touch(const char *dir, const char *file)
{
	char path[512];
	FILE *f;
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
}

static void test_v2_fake_tree(void **st)
{
	struct cgbox_layout lo;
	struct cgbox_limits lim;
	char dir[512], buf[256];
	(void)st;

	memset(&lo, 0, sizeof(lo));
	lo.mode = CGBOX_V2;
	snprintf(lo.v2, sizeof(lo.v2), "%s", tmpl);
	lo.bpf_devices = false;
	memset(&lim, 0, sizeof(lim));
	lim.mem_bytes = 4ull << 30;
	lim.cpu_milli = 1500;
	lim.pids_max = 512;
	lim.io_weight = 200;
	lim.io_write_bytes_per_s = 1 << 20;
	lim.io_major = 7;
	lim.io_minor = 3;
	lim.devices = true;
	/* the parent exists with the optional knobs a real cgroup would have */
	snprintf(dir, sizeof(dir), "%s/labd", tmpl);
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(dir, sizeof(dir), "%s/labd/box1", tmpl);
	assert_int_equal(cgbox_create(&lo, "labd", "box1", &lim), 0);
	slurp(dir, "memory.max", buf, sizeof(buf));
	assert_string_equal(buf, "4294967296");
	slurp(dir, "cpu.max", buf, sizeof(buf));
	assert_string_equal(buf, "150000 100000");
	slurp(dir, "pids.max", buf, sizeof(buf));
	assert_string_equal(buf, "512");
	slurp(dir, "io.max", buf, sizeof(buf));
	assert_string_equal(buf, "7:3 wbps=1048576");
	/* controllers enabled top-down (the last write wins in a plain file) */
	slurp(tmpl, "cgroup.subtree_control", buf, sizeof(buf));
	assert_string_equal(buf, "+io");
	assert_int_equal(cgbox_attach(&lo, "labd", "box1", 4242), 0);
	slurp(dir, "cgroup.procs", buf, sizeof(buf));
	assert_string_equal(buf, "4242");
	/* OOM kills are read from memory.events */
	{
		FILE *f;
		char path[600];
		snprintf(path, sizeof(path), "%s/memory.events", dir);
		f = fopen(path, "w");
		assert_non_null(f);
		fputs("low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n", f);
		fclose(f);
	}
	assert_int_equal(cgbox_oom_kills(&lo, "labd", "box1"), 2);
	assert_int_equal(cgbox_path(&lo, CGBOX_PIDS, "labd", "box1", buf, sizeof(buf)), 0);
	assert_string_equal(buf, dir);
	/* a name that exists is refused: it is not ours to remove */
	assert_int_equal(cgbox_create(&lo, "labd", "box1", &lim), -1);
	assert_int_equal(access(dir, F_OK), 0);
	/* bad names never reach the file system */
	assert_int_equal(cgbox_create(&lo, "labd", "../x", &lim), -1);
	assert_int_equal(cgbox_create(&lo, "..", "x", &lim), -1);
	/* remove empties the fake dir and deletes it */
	assert_int_equal(cgbox_remove(&lo, "labd", "box1"), 0);
	assert_int_equal(access(dir, F_OK), -1);
}

static void test_v2_optional_knobs(void **st)
{
	struct cgbox_layout lo;
	struct cgbox_limits lim;
	char dir[512], buf[64];
	(void)st;

	memset(&lo, 0, sizeof(lo));
	lo.mode = CGBOX_V2;
	snprintf(lo.v2, sizeof(lo.v2), "%s", tmpl);
	memset(&lim, 0, sizeof(lim));
	lim.mem_bytes = 1 << 30;
	lim.io_weight = 100;
	snprintf(dir, sizeof(dir), "%s/p2", tmpl);
	mkdir(dir, 0755);
	snprintf(dir, sizeof(dir), "%s/p2/b", tmpl);
	assert_int_equal(cgbox_create(&lo, "p2", "b", &lim), 0);
	slurp(dir, "memory.max", buf, sizeof(buf));
	assert_string_equal(buf, "1073741824");
	/* io.weight and memory.swap.max are written only where the kernel has them */
	{
		char p[600];
		snprintf(p, sizeof(p), "%s/io.weight", dir);
		assert_int_equal(access(p, F_OK), -1);
		snprintf(p, sizeof(p), "%s/memory.swap.max", dir);
		assert_int_equal(access(p, F_OK), -1);
	}
	assert_int_equal(cgbox_remove(&lo, "p2", "b"), 0);
}

static void test_v1_fake_tree(void **st)
{
	struct cgbox_layout lo;
	struct cgbox_limits lim;
	char dir[512], buf[256];
	(void)st;

	memset(&lo, 0, sizeof(lo));
	lo.mode = CGBOX_V1;
	for (int c = 0; c < CGBOX_NCTL; c++) {
		snprintf(lo.v1[c], sizeof(lo.v1[c]), "%s/v1-%s", tmpl, cgbox_ctl_name(c));
		mkdir(lo.v1[c], 0755);
	}
	/* memsw exists only with swap accounting: pretend it does */
	snprintf(dir, sizeof(dir), "%s/labd", lo.v1[CGBOX_MEMORY]);
	mkdir(dir, 0755);
	snprintf(dir, sizeof(dir), "%s/labd/b", lo.v1[CGBOX_MEMORY]);
	memset(&lim, 0, sizeof(lim));
	lim.mem_bytes = 64ull << 20;
	lim.cpu_milli = 500;
	lim.pids_max = 64;
	lim.devices = true;
	lim.devs[lim.n_devs++] = (struct cgbox_dev){'c', 1, 3};
	lim.devs[lim.n_devs++] = (struct cgbox_dev){'c', 195, 1};
	assert_int_equal(cgbox_create(&lo, "labd", "b", &lim), 0);
	slurp(dir, "memory.limit_in_bytes", buf, sizeof(buf));
	assert_string_equal(buf, "67108864");
	snprintf(dir, sizeof(dir), "%s/labd/b", lo.v1[CGBOX_CPU]);
	slurp(dir, "cpu.cfs_quota_us", buf, sizeof(buf));
	assert_string_equal(buf, "50000");
	slurp(dir, "cpu.cfs_period_us", buf, sizeof(buf));
	assert_string_equal(buf, "100000");
	snprintf(dir, sizeof(dir), "%s/labd/b", lo.v1[CGBOX_PIDS]);
	slurp(dir, "pids.max", buf, sizeof(buf));
	assert_string_equal(buf, "64");
	snprintf(dir, sizeof(dir), "%s/labd/b", lo.v1[CGBOX_DEVICES]);
	slurp(dir, "devices.deny", buf, sizeof(buf));
	assert_string_equal(buf, "a");
	/* a plain file keeps the last rule written: the GPU one */
	slurp(dir, "devices.allow", buf, sizeof(buf));
	assert_string_equal(buf, "c 195:1 rw");
	snprintf(dir, sizeof(dir), "%s/labd/b", lo.v1[CGBOX_MEMORY]);
	{
		FILE *f;
		char path[600];
		snprintf(path, sizeof(path), "%s/memory.oom_control", dir);
		f = fopen(path, "w");
		assert_non_null(f);
		fputs("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n", f);
		fclose(f);
	}
	assert_int_equal(cgbox_oom_kills(&lo, "labd", "b"), 1);
	assert_int_equal(cgbox_remove(&lo, "labd", "b"), 0);
	for (int c = 0; c < CGBOX_NCTL; c++) {
		snprintf(dir, sizeof(dir), "%s/labd/b", lo.v1[c]);
		assert_int_equal(access(dir, F_OK), -1);
	}
	(void)touch;
}

static void test_bpf_program_shape(void **st)
{
	struct cgbox_dev devs[3] = {{'c', 1, 3}, {'c', 136, ~0u}, {'b', 7, 0}};
	struct bpf_insn insns[CGBPF_MAX_INSNS];
	struct cgbox_dev many[CGBOX_MAX_DEVS + 1];
	int n;
	(void)st;

	n = cgbpf_dev_build(devs, 3, insns, CGBPF_MAX_INSNS);
	assert_int_equal(n, 6 + 3 * 8 + 2);
	/* the final instructions deny: r0 = 0; exit */
	assert_int_equal(insns[n - 2].code, BPF_ALU64 | BPF_MOV | BPF_K);
	assert_int_equal(insns[n - 2].imm, 0);
	assert_int_equal(insns[n - 1].code, BPF_JMP | BPF_EXIT);
	/* first rule: char type, major 1, minor 3 */
	assert_int_equal(insns[6].imm, BPF_DEVCG_DEV_CHAR);
	assert_int_equal(insns[7].imm, 1);
	assert_int_equal(insns[8].imm, 3);
	/* wildcard minor: no minor compare */
	assert_int_equal(insns[14 + 2].code, BPF_ALU64 | BPF_MOV | BPF_K);
	/* block device rule */
	assert_int_equal(insns[22].imm, BPF_DEVCG_DEV_BLOCK);
	/* every jump lands inside the program */
	for (int i = 0; i < n; i++)
		if ((insns[i].code & 0x07) == BPF_JMP && insns[i].code != (BPF_JMP | BPF_EXIT))
			assert_true(i + 1 + insns[i].off < n);
	memset(many, 0, sizeof(many));
	assert_int_equal(cgbpf_dev_build(many, CGBOX_MAX_DEVS + 1, insns, CGBPF_MAX_INSNS), -1);
	assert_int_equal(cgbpf_dev_build(devs, 3, insns, 10), -1);
}

/* What the host's cgroups lack is named, never skipped: v1 without memsw (swap
 * accounting off) or without pids, v2 without the pids controller. */
static void test_gaps(void **st)
{
	struct cgbox_layout lo;
	const char *w[4];
	char mem[200], path[320];
	(void)st;

	memset(&lo, 0, sizeof(lo));
	lo.mode = CGBOX_V1;
	snprintf(mem, sizeof(mem), "%s/memory", tmpl);
	assert_int_equal(mkdir(mem, 0755), 0);
	snprintf(lo.v1[CGBOX_MEMORY], sizeof(lo.v1[0]), "%s", mem);
	snprintf(lo.v1[CGBOX_PIDS], sizeof(lo.v1[0]), "%s/pids", tmpl);
	assert_int_equal(cgbox_gaps(&lo, w, 4), 1);
	assert_non_null(strstr(w[0], "memsw"));
	touch(mem, "memory.memsw.limit_in_bytes");
	assert_int_equal(cgbox_gaps(&lo, w, 4), 0);
	lo.v1[CGBOX_PIDS][0] = '\0';
	assert_int_equal(cgbox_gaps(&lo, w, 4), 1);
	assert_non_null(strstr(w[0], "no pids controller"));
	assert_int_equal(cgbox_gaps(&lo, w, 0), 0); /* never past max */

	memset(&lo, 0, sizeof(lo));
	lo.mode = CGBOX_V2;
	snprintf(lo.v2, sizeof(lo.v2), "%s", tmpl);
	snprintf(path, sizeof(path), "%s/cgroup.controllers", tmpl);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("cpuset cpu io memory\n", f);
	fclose(f);
	assert_int_equal(cgbox_gaps(&lo, w, 4), 1);
	assert_non_null(strstr(w[0], "cgroup v2: no pids controller"));
}

/* Real kernel check of the v2 device program: needs root and a cgroup2 mount. */
static void test_bpf_program_real(void **st)
{
	const char *roots[] = {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"};
	struct cgbox_dev devs[1] = {{'c', 1, 3}}; /* /dev/null only */
	struct bpf_insn insns[CGBPF_MAX_INSNS];
	char dir[256], procs[300];
	struct statfs sfs;
	const char *root = NULL;
	int n, fd, status;
	pid_t pid;
	(void)st;

	for (size_t i = 0; i < 2; i++)
		if (statfs(roots[i], &sfs) == 0 && sfs.f_type == CGROUP2_SUPER_MAGIC) {
			root = roots[i];
			break;
		}
	if (geteuid() != 0 || !root) {
		skip();
		return;
	}
	snprintf(dir, sizeof(dir), "%s/labd-bpf-test-%d", root, (int)getpid());
	assert_int_equal(mkdir(dir, 0755), 0);
	n = cgbpf_dev_build(devs, 1, insns, CGBPF_MAX_INSNS);
	fd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(cgbpf_dev_attach(fd, insns, (size_t)n), 0);
	close(fd);
	pid = fork();
	if (pid == 0) {
		FILE *f;
		int a, b;
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
		f = fopen(procs, "w");
		if (!f || fprintf(f, "%d", (int)getpid()) < 0 || fclose(f) != 0)
			_exit(10);
		a = open("/dev/null", O_RDWR);
		b = open("/dev/zero", O_RDONLY);
		/* allowed, denied with EPERM */
		_exit(a >= 0 && b < 0 && errno == EPERM ? 0 : 11);
	}
	assert_true(pid > 0);
	waitpid(pid, &status, 0);
	rmdir(dir);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_v2_fake_tree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v2_optional_knobs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v1_fake_tree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gaps, setup, teardown),
		cmocka_unit_test(test_bpf_program_shape),
		cmocka_unit_test(test_bpf_program_real),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
