/* cgbox.c - per-sandbox cgroups on v1/hybrid and v2; see cgbox.h.
 *
 * Knob mapping (libcgroup's abstraction covers only cpu, cpuset and memory, so we keep
 * one table for all of them and write the files ourselves):
 *   memory   v1 memory.limit_in_bytes (+ memory.memsw.limit_in_bytes)   v2 memory.max, memory.swap.max=0
 *   cpu      v1 cpu.cfs_period_us + cpu.cfs_quota_us                     v2 cpu.max "QUOTA PERIOD"
 *   pids     v1/v2 pids.max (fork/clone get EAGAIN at the limit)
 *   io       v1 blkio.weight, blkio.throttle.write_bps_device            v2 io.weight, io.max wbps=
 *   devices  v1 devices.deny "a" + devices.allow "c M:m rw"             v2 BPF device program
 */
#include "sandbox/cgbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libcgroup.h>
#include <linux/magic.h>
#include <mntent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/cgbpf.h"
#include "labd/log.h"
#include "sandbox/fail.h"

static const char *const ctl_names[CGBOX_NCTL] = {"memory",  "cpu",     "pids",   "blkio",
						  "devices", "freezer", "cpuacct", "unified"};

const char *cgbox_ctl_name(enum cgbox_ctl c) { return c < CGBOX_NCTL ? ctl_names[c] : "?"; }

const struct cgbox_layout *cgbox_host(void)
{
	/* the hierarchies do not move while we run: detect once */
	static struct cgbox_layout host;
	static int state; /* 0 not yet, 1 usable, -1 not */

	if (state == 0)
		state = cgbox_detect(&host) == 0 ? 1 : -1;
	return state == 1 ? &host : NULL;
}

static int component_ok(const char *s)
{
	return s && s[0] && s[0] != '.' && !strchr(s, '/') && strlen(s) < 128;
}

static bool names_ctl(const char *ctls, size_t len, const char *c);

/* Where each v1 controller is mounted: the first "cgroup" entry of the mount table
 * whose options name it (what libcgroup's cgroup_init reads too). */
static void v1_from_mounts(struct cgbox_layout *lo)
{
	FILE *f = setmntent("/proc/self/mounts", "re");
	struct mntent m;
	char buf[4096];

	if (!f)
		return;
	while (getmntent_r(f, &m, buf, sizeof(buf)))
		for (int c = 0; c < CGBOX_UNIFIED && strcmp(m.mnt_type, "cgroup") == 0; c++)
			if (!lo->v1[c][0] && names_ctl(m.mnt_opts, strlen(m.mnt_opts), ctl_names[c]))
				snprintf(lo->v1[c], sizeof(lo->v1[c]), "%s", m.mnt_dir);
	endmntent(f);
}

int cgbox_detect(struct cgbox_layout *lo)
{
	struct statfs sfs;

	memset(lo, 0, sizeof(*lo));
	if (statfs("/sys/fs/cgroup", &sfs) == 0 && sfs.f_type == CGROUP2_SUPER_MAGIC) {
		lo->mode = CGBOX_V2;
		snprintf(lo->v2, sizeof(lo->v2), "/sys/fs/cgroup");
		lo->bpf_devices = true;
		return 0;
	}
	lo->mode = CGBOX_V1;
	/* a hybrid host's v2 tree: no controller, but PSI and CPU time per cgroup */
	if (statfs("/sys/fs/cgroup/unified", &sfs) == 0 && sfs.f_type == CGROUP2_SUPER_MAGIC)
		snprintf(lo->v1[CGBOX_UNIFIED], sizeof(lo->v1[CGBOX_UNIFIED]), "/sys/fs/cgroup/unified");
	v1_from_mounts(lo);
	/* libcgroup for what the mount table did not show (cgroup_init alone is 0.35 ms of
	 * each labbox run), then the usual place */
	int lrc = -1;
	bool tried = false;
	for (int c = 0; c < CGBOX_UNIFIED; c++) {
		char *mp = NULL;
		if (lo->v1[c][0])
			continue;
		if (!tried) {
			lrc = cgroup_init();
			tried = true;
		}
		if (lrc == 0 && cgroup_get_subsys_mount_point(ctl_names[c], &mp) == 0 && mp) {
			snprintf(lo->v1[c], sizeof(lo->v1[c]), "%s", mp);
		} else {
			char guess[256];
			snprintf(guess, sizeof(guess), "/sys/fs/cgroup/%s", ctl_names[c]);
			if (statfs(guess, &sfs) == 0 && sfs.f_type == CGROUP_SUPER_MAGIC)
				snprintf(lo->v1[c], sizeof(lo->v1[c]), "%s", guess);
		}
		free(mp);
	}
	if (!lo->v1[CGBOX_MEMORY][0] || !lo->v1[CGBOX_PIDS][0])
		return fail_error("cgroup v1: memory or pids controller not mounted");
	return 0;
}

static bool knob_exists(const char *dir, const char *file);

/* true when the v2 root offers controller name (cgroup.controllers lists it) */
static bool v2_offers(const char *root, const char *name)
{
	char path[300], line[256], *save = NULL;
	FILE *f;
	bool found = false;

	snprintf(path, sizeof(path), "%s/cgroup.controllers", root);
	if (!(f = fopen(path, "re")))
		return false;
	if (fgets(line, sizeof(line), f))
		for (char *w = strtok_r(line, " \n", &save); w; w = strtok_r(NULL, " \n", &save))
			found |= strcmp(w, name) == 0;
	fclose(f);
	return found;
}

int cgbox_gaps(const struct cgbox_layout *lo, const char **out, int max)
{
	int n = 0;

#define GAP(text) (n < max ? (void)(out[n++] = (text)) : (void)0)
	if (lo->mode == CGBOX_V2) {
		if (!v2_offers(lo->v2, "memory"))
			GAP("cgroup v2: no memory controller: sandboxes cannot start");
		if (!v2_offers(lo->v2, "pids"))
			GAP("cgroup v2: no pids controller: sandboxes cannot start (no process limit)");
		return n;
	}
	if (!lo->v1[CGBOX_PIDS][0])
		GAP("cgroup v1: no pids controller: sandboxes cannot start (no process limit)");
	if (!lo->v1[CGBOX_MEMORY][0])
		GAP("cgroup v1: no memory controller: sandboxes cannot start");
	else if (!knob_exists(lo->v1[CGBOX_MEMORY], "memory.memsw.limit_in_bytes"))
		GAP("cgroup v1: no memory.memsw (swap accounting is off; boot with swapaccount=1): "
		    "with swap on the host, a sandbox's memory and tmpfs can spill into swap past "
		    "its memory limit");
#undef GAP
	return n;
}

int cgbox_path(const struct cgbox_layout *lo, enum cgbox_ctl c, const char *parent,
	       const char *name, char *buf, size_t size)
{
	const char *root = lo->mode == CGBOX_V2 ? lo->v2 : lo->v1[c];
	int n;

	if (!root[0])
		return -1;
	if (name)
		n = snprintf(buf, size, "%s/%s/%s", root, parent, name);
	else
		n = snprintf(buf, size, "%s/%s", root, parent);
	return (n < 0 || (size_t)n >= size) ? -1 : 0;
}

static int write_knob(const char *dir, const char *file, const char *value)
{
	char path[512];
	size_t len = strlen(value);
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return fail_error("cgroup path too long: %s", dir);
	/* O_CREAT only matters for the fake trees of the unit tests: cgroupfs files exist. */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return fail_errno("open %s", path);
	if (write(fd, value, len) != (ssize_t)len) {
		fail_errno("write %s to %s", value, path);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static bool knob_exists(const char *dir, const char *file)
{
	char path[512];
	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return false;
	return access(path, F_OK) == 0;
}

static int write_u64(const char *dir, const char *file, uint64_t v)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return write_knob(dir, file, buf);
}

static int mkdir_ok(const char *path)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return fail_errno("mkdir %s", path);
	return 0;
}

static int v1_limits(const struct cgbox_layout *lo, const char *parent, const char *name,
		     const struct cgbox_limits *lim)
{
	char dir[512], buf[128];

	if (lim->mem_bytes && cgbox_path(lo, CGBOX_MEMORY, parent, name, dir, sizeof(dir)) == 0) {
		if (write_u64(dir, "memory.limit_in_bytes", lim->mem_bytes) < 0)
			return -1;
		/* no swap beyond the limit either (memsw exists with swap accounting) */
		if (knob_exists(dir, "memory.memsw.limit_in_bytes") &&
		    write_u64(dir, "memory.memsw.limit_in_bytes", lim->mem_bytes) < 0)
			return -1;
	}
	if (lim->cpu_milli) {
		if (cgbox_path(lo, CGBOX_CPU, parent, name, dir, sizeof(dir)) < 0)
			return fail_error("cgroup v1: cpu controller not mounted");
		if (write_knob(dir, "cpu.cfs_period_us", "100000") < 0 ||
		    write_u64(dir, "cpu.cfs_quota_us", (uint64_t)lim->cpu_milli * 100) < 0)
			return -1;
	}
	if (lim->pids_max && cgbox_path(lo, CGBOX_PIDS, parent, name, dir, sizeof(dir)) == 0 &&
	    write_u64(dir, "pids.max", lim->pids_max) < 0)
		return -1;
	if (cgbox_path(lo, CGBOX_BLKIO, parent, name, dir, sizeof(dir)) == 0) {
		/* blkio.weight exists only with CFQ/BFQ-style schedulers: "where available" */
		if (lim->io_weight && knob_exists(dir, "blkio.weight")) {
			uint64_t w = 10 + ((uint64_t)lim->io_weight - 1) * 990 / 9999;
			if (write_u64(dir, "blkio.weight", w) < 0)
				return -1;
		}
		if (lim->io_write_bytes_per_s && (lim->io_major || lim->io_minor)) {
			snprintf(buf, sizeof(buf), "%u:%u %" PRIu64, lim->io_major, lim->io_minor,
				 lim->io_write_bytes_per_s);
			if (write_knob(dir, "blkio.throttle.write_bps_device", buf) < 0)
				return -1;
		}
	}
	if (lim->devices) {
		if (cgbox_path(lo, CGBOX_DEVICES, parent, name, dir, sizeof(dir)) < 0)
			return fail_error("cgroup v1: devices controller not mounted");
		/* default deny, then exactly the listed nodes; no 'm': nodes can't be made */
		if (write_knob(dir, "devices.deny", "a") < 0)
			return -1;
		for (size_t i = 0; i < lim->n_devs; i++) {
			snprintf(buf, sizeof(buf), "%c %u:%u rw", lim->devs[i].type, lim->devs[i].major,
				 lim->devs[i].minor);
			if (write_knob(dir, "devices.allow", buf) < 0)
				return -1;
		}
	}
	return 0;
}

static int v2_enable(const char *dir)
{
	static const char *const ctls[] = {"+memory", "+cpu", "+pids", "+io"};
	for (size_t i = 0; i < sizeof(ctls) / sizeof(ctls[0]); i++) {
		/* one at a time: a controller the kernel lacks must not block the others */
		if (write_knob(dir, "cgroup.subtree_control", ctls[i]) < 0)
			log_warn("cgroup v2: cannot enable %s in %s", ctls[i] + 1, dir);
	}
	return 0;
}

static int v2_limits(const struct cgbox_layout *lo, const char *dir, const struct cgbox_limits *lim)
{
	char buf[128];

	if (lim->mem_bytes) {
		if (write_u64(dir, "memory.max", lim->mem_bytes) < 0)
			return -1;
		if (knob_exists(dir, "memory.swap.max") && write_knob(dir, "memory.swap.max", "0") < 0)
			return -1;
	}
	if (lim->cpu_milli) {
		snprintf(buf, sizeof(buf), "%" PRIu64 " 100000", (uint64_t)lim->cpu_milli * 100);
		if (write_knob(dir, "cpu.max", buf) < 0)
			return -1;
	}
	if (lim->pids_max && write_u64(dir, "pids.max", lim->pids_max) < 0)
		return -1;
	if (lim->io_weight && knob_exists(dir, "io.weight")) {
		snprintf(buf, sizeof(buf), "default %u", lim->io_weight);
		if (write_knob(dir, "io.weight", buf) < 0)
			return -1;
	}
	if (lim->io_write_bytes_per_s && (lim->io_major || lim->io_minor)) {
		snprintf(buf, sizeof(buf), "%u:%u wbps=%" PRIu64, lim->io_major, lim->io_minor,
			 lim->io_write_bytes_per_s);
		if (write_knob(dir, "io.max", buf) < 0)
			return -1;
	}
	if (lim->devices && lo->bpf_devices) {
		struct bpf_insn insns[CGBPF_MAX_INSNS];
		int n = cgbpf_dev_build(lim->devs, lim->n_devs, insns, CGBPF_MAX_INSNS);
		int fd, rc;
		if (n < 0)
			return fail_error("cgroup v2: device program too large");
		fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return fail_errno("open %s", dir);
		rc = cgbpf_dev_attach(fd, insns, (size_t)n);
		close(fd);
		if (rc < 0)
			return -1;
	}
	return 0;
}

int cgbox_make(const struct cgbox_layout *lo, const char *parent, const char *name)
{
	char dir[512];

	if (!component_ok(parent) || !component_ok(name))
		return fail_error("cgroup: bad name %s/%s", parent ? parent : "", name ? name : "");
	if (lo->mode == CGBOX_V2) {
		if (v2_enable(lo->v2) < 0 || cgbox_path(lo, 0, parent, NULL, dir, sizeof(dir)) < 0 ||
		    mkdir_ok(dir) < 0 || v2_enable(dir) < 0)
			goto fail;
		if (cgbox_path(lo, 0, parent, name, dir, sizeof(dir)) < 0 || mkdir(dir, 0755) < 0) {
			fail_errno("mkdir %s", dir);
			return -1; /* an existing cgroup of that name is not ours to remove */
		}
		return 0;
	}
	for (int c = 0; c < CGBOX_NCTL; c++) {
		if (!lo->v1[c][0])
			continue;
		if (cgbox_path(lo, c, parent, NULL, dir, sizeof(dir)) < 0 || mkdir_ok(dir) < 0)
			goto fail;
		if (cgbox_path(lo, c, parent, name, dir, sizeof(dir)) < 0 || mkdir_ok(dir) < 0)
			goto fail;
	}
	return 0;
fail:
	cgbox_remove(lo, parent, name);
	return -1;
}

int cgbox_limit(const struct cgbox_layout *lo, const char *parent, const char *name,
		const struct cgbox_limits *lim)
{
	char dir[512];

	if (lo->mode == CGBOX_V1)
		return v1_limits(lo, parent, name, lim);
	if (cgbox_path(lo, 0, parent, name, dir, sizeof(dir)) < 0)
		return fail_error("cgroup path too long: %s/%s", parent, name);
	return v2_limits(lo, dir, lim);
}

int cgbox_create(const struct cgbox_layout *lo, const char *parent, const char *name,
		 const struct cgbox_limits *lim)
{
	if (cgbox_make(lo, parent, name) < 0)
		return -1;
	if (cgbox_limit(lo, parent, name, lim) < 0) {
		cgbox_remove(lo, parent, name);
		return -1;
	}
	return 0;
}

int cgbox_attach(const struct cgbox_layout *lo, const char *parent, const char *name, pid_t pid)
{
	char dir[512];

	if (lo->mode == CGBOX_V2) {
		if (cgbox_path(lo, 0, parent, name, dir, sizeof(dir)) < 0)
			return -1;
		return write_u64(dir, "cgroup.procs", (uint64_t)pid);
	}
	for (int c = 0; c < CGBOX_NCTL; c++) {
		if (!lo->v1[c][0])
			continue;
		if (cgbox_path(lo, c, parent, name, dir, sizeof(dir)) < 0 ||
		    write_u64(dir, "cgroup.procs", (uint64_t)pid) < 0)
			return -1;
	}
	return 0;
}

/* Writes "0" to dir/tasks: the calling thread moves itself, which needs neither the
 * threadgroup lock nor, unlike write_knob, ever creates the file. */
static int move_self(const char *dir)
{
	char path[600];
	int fd, rc;

	if (snprintf(path, sizeof(path), "%s/tasks", dir) >= (int)sizeof(path))
		return -1;
	fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	rc = write(fd, "0", 1) == 1 ? 0 : -1;
	close(fd);
	return rc;
}

/* Whether the controller list ctls ("cpu,cpuacct") of a /proc/.../cgroup line names c. */
static bool names_ctl(const char *ctls, size_t len, const char *c)
{
	size_t n = strlen(c);

	for (const char *p = ctls, *end = ctls + len; p < end;) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		size_t w = comma ? (size_t)(comma - p) : (size_t)(end - p);
		if (w == n && memcmp(p, c, n) == 0)
			return true;
		p += w + 1;
	}
	return false;
}

/* The calling thread's own cgroup dir in v1 hierarchy c (its mount point and the path
 * /proc/thread-self/cgroup names), when that dir has a tasks file; 0 or -1. */
static int own_cgroup(const struct cgbox_layout *lo, const char *self, enum cgbox_ctl c,
		      char *buf, size_t size)
{
	char tasks[600];

	for (const char *line = self; *line;) {
		const char *nl = strchr(line, '\n'), *c1 = strchr(line, ':'), *c2;
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		if (c1 && c1 < line + len && (c2 = memchr(c1 + 1, ':', (size_t)(line + len - c1 - 1))) &&
		    names_ctl(c1 + 1, (size_t)(c2 - c1 - 1), ctl_names[c])) {
			int n = snprintf(buf, size, "%s%.*s", lo->v1[c], (int)(line + len - c2 - 1), c2 + 1);
			if (n < 0 || (size_t)n >= size)
				return -1;
			if (n > 1 && buf[n - 1] == '/')
				buf[n - 1] = '\0';
			snprintf(tasks, sizeof(tasks), "%s/tasks", buf);
			return access(tasks, W_OK) == 0 ? 0 : -1;
		}
		line += len + (nl ? 1 : 0);
	}
	return -1;
}

int cgbox_birth_enter(const struct cgbox_layout *lo, const char *parent, const char *name,
		      struct cgbox_birth *b)
{
	char dir[512], self[4096];
	ssize_t n = -1;
	int fd;

	memset(b, 0, sizeof(*b));
	b->into_fd = -1;
	if (cgbox_path(lo, lo->mode == CGBOX_V2 ? 0 : CGBOX_UNIFIED, parent, name, dir, sizeof(dir)) == 0)
		b->into_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lo->mode == CGBOX_V2)
		return 0;
	if ((fd = open("/proc/thread-self/cgroup", O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, self, sizeof(self) - 1);
		close(fd);
	}
	if (n <= 0)
		return 0; /* every hierarchy is attached afterwards */
	self[n] = '\0';
	b->in = true;
	for (int c = 0; c < CGBOX_UNIFIED; c++) {
		enum cgbox_ctl ctl = (enum cgbox_ctl)c;
		if (!lo->v1[c][0] || own_cgroup(lo, self, ctl, b->from[c], sizeof(b->from[c])) < 0 ||
		    cgbox_path(lo, ctl, parent, name, dir, sizeof(dir)) < 0)
			continue;
		b->inherited[c] = move_self(dir) == 0;
	}
	return 0;
}

int cgbox_birth_leave(const struct cgbox_layout *lo, struct cgbox_birth *b)
{
	int rc = 0;

	if (b->into_fd >= 0)
		close(b->into_fd);
	b->into_fd = -1;
	if (!b->in)
		return 0;
	b->in = false;
	for (int c = 0; c < CGBOX_UNIFIED; c++) {
		if (!b->inherited[c] || move_self(b->from[c]) == 0)
			continue;
		/* its own cgroup went away meanwhile: the hierarchy's root, never the sandbox's */
		if (move_self(lo->v1[c]) < 0)
			rc = fail_errno("cgroup %s: cannot leave the sandbox's cgroup", ctl_names[c]);
	}
	return rc;
}

int cgbox_attach_rest(const struct cgbox_layout *lo, const char *parent, const char *name,
		      pid_t pid, const struct cgbox_birth *b, bool into_taken)
{
	char dir[512];

	for (int c = 0; c < (lo->mode == CGBOX_V2 ? 1 : CGBOX_NCTL); c++) {
		bool unified = lo->mode == CGBOX_V2 || c == CGBOX_UNIFIED;
		if ((lo->mode == CGBOX_V1 && !lo->v1[c][0]) || (unified ? into_taken : b->inherited[c]))
			continue;
		if (cgbox_path(lo, (enum cgbox_ctl)c, parent, name, dir, sizeof(dir)) < 0 ||
		    write_u64(dir, "cgroup.procs", (uint64_t)pid) < 0)
			return -1;
	}
	return 0;
}

/* Reads "key value" lines of a flat-keyed cgroup file; returns value of key or 0. */
static uint64_t read_keyed(const char *dir, const char *file, const char *key)
{
	char path[512], line[256];
	uint64_t v = 0;
	size_t klen = strlen(key);
	FILE *f;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return 0;
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, klen) == 0 && line[klen] == ' ') {
			v = strtoull(line + klen + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

uint64_t cgbox_oom_kills(const struct cgbox_layout *lo, const char *parent, const char *name)
{
	char dir[512];

	if (cgbox_path(lo, CGBOX_MEMORY, parent, name, dir, sizeof(dir)) < 0)
		return 0;
	if (lo->mode == CGBOX_V2)
		return read_keyed(dir, "memory.events", "oom_kill");
	return read_keyed(dir, "memory.oom_control", "oom_kill");
}

/* Reads up to max pids from dir/cgroup.procs; returns the count or -1. */
static int read_procs(const char *dir, pid_t *pids, int max)
{
	char path[512];
	long v;
	int n = 0;
	FILE *f;

	if (snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >= (int)sizeof(path))
		return -1;
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : -1;
	while (fscanf(f, "%ld", &v) == 1) {
		if (n < max && pids)
			pids[n] = (pid_t)v;
		n++;
	}
	fclose(f);
	return n;
}

static int procs_dir(const struct cgbox_layout *lo, const char *parent, const char *name,
		     char *dir, size_t size)
{
	if (lo->mode == CGBOX_V2)
		return cgbox_path(lo, 0, parent, name, dir, size);
	if (cgbox_path(lo, CGBOX_PIDS, parent, name, dir, size) == 0)
		return 0;
	return cgbox_path(lo, CGBOX_MEMORY, parent, name, dir, size);
}

int cgbox_nprocs(const struct cgbox_layout *lo, const char *parent, const char *name)
{
	char dir[512];
	if (procs_dir(lo, parent, name, dir, sizeof(dir)) < 0)
		return -1;
	return read_procs(dir, NULL, 0);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

int cgbox_kill(const struct cgbox_layout *lo, const char *parent, const char *name)
{
	char dir[512], fdir[512];
	pid_t pids[1024];
	bool frozen = false;

	if (procs_dir(lo, parent, name, dir, sizeof(dir)) < 0)
		return -1;
	if (access(dir, F_OK) < 0)
		return 0;
	if (lo->mode == CGBOX_V2 && knob_exists(dir, "cgroup.kill")) {
		/* Linux >= 5.14: one write kills every process, no fork race */
		write_knob(dir, "cgroup.kill", "1");
	}
	for (int round = 0; round < 500; round++) {
		int n = read_procs(dir, pids, 1024);
		bool self = false;
		if (n <= 0)
			break;
		/* a failed cgbox_birth_leave left this process inside: never freeze or kill it */
		for (int i = 0; i < n && i < 1024; i++)
			self |= pids[i] == getpid();
		/* Freeze first so a fork bomb cannot outrun the kill loop. */
		if (!frozen && !self) {
			if (lo->mode == CGBOX_V2 && knob_exists(dir, "cgroup.freeze"))
				frozen = write_knob(dir, "cgroup.freeze", "1") == 0;
			else if (lo->mode == CGBOX_V1 &&
				 cgbox_path(lo, CGBOX_FREEZER, parent, name, fdir, sizeof(fdir)) == 0)
				frozen = write_knob(fdir, "freezer.state", "FROZEN") == 0;
			if (frozen)
				n = read_procs(dir, pids, 1024);
		}
		for (int i = 0; i < n && i < 1024; i++)
			if (pids[i] != getpid())
				kill(pids[i], SIGKILL);
		if (frozen) {
			/* killed tasks only die once thawed */
			if (lo->mode == CGBOX_V2)
				write_knob(dir, "cgroup.freeze", "0");
			else
				write_knob(fdir, "freezer.state", "THAWED");
			frozen = false;
		}
		sleep_ms(round < 10 ? 2 : 10);
	}
	if (read_procs(dir, NULL, 0) > 0)
		return fail_error("cgroup %s/%s: processes survive SIGKILL", parent, name);
	return 0;
}

int cgbox_remove(const struct cgbox_layout *lo, const char *parent, const char *name)
{
	char dir[512];
	int rc = 0;

	for (int c = 0; c < (lo->mode == CGBOX_V2 ? 1 : CGBOX_NCTL); c++) {
		if (cgbox_path(lo, c, parent, name, dir, sizeof(dir)) < 0)
			continue;
		for (int tries = 0;; tries++) {
			if (rmdir(dir) == 0 || errno == ENOENT)
				break;
			/* A fake tree (unit tests) holds the knob files we created: empty it. */
			if (errno == ENOTEMPTY) {
				DIR *d = opendir(dir);
				struct dirent *e;
				while (d && (e = readdir(d)))
					if (e->d_type == DT_REG)
						unlinkat(dirfd(d), e->d_name, 0);
				if (d)
					closedir(d);
			}
			if (tries >= 100) {
				rc = fail_errno("rmdir %s", dir);
				break;
			}
			sleep_ms(10); /* EBUSY: the last task is still being reaped */
		}
	}
	return rc;
}
