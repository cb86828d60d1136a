/* usage.c - what a sandbox has used, from its cgroups (docs/sandbox.md, "Usage"): the
 * supervisor samples it every second while a job trains.
 *
 *   cpu_usage_us   v2 cpu.stat usage_usec; v1 cpuacct.usage (ns) / 1000, else the
 *                  hybrid unified tree's cpu.stat (present without any controller)
 *   memory_bytes   v2 memory.current; v1 memory.usage_in_bytes (both count page cache)
 *   memory_limit   v2 memory.max ("max" = none); v1 memory.limit_in_bytes (2^62 and
 *                  above = none)
 *   io_wait_us     io.pressure "some" total: the time at least one task of the cgroup
 *                  waited for I/O (PSI); v2, or the unified tree of a hybrid host.  Pure
 *                  v1 has no equivalent (blkio.io_wait_time was CFQ's, gone since 5.0):
 *                  -1 there
 *   oom_kills      v2 memory.events oom_kill; v1 memory.oom_control oom_kill (4.13+).
 *                  Not memory.failcnt: that counts hits of the limit, most of which
 *                  reclaim resolves without killing anything.
 */
#include "labd/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox/cgbox.h"
#include "sandbox/state.h"

#define V1_NO_LIMIT (1ull << 62)

/* The whole (small) file at dir/file into buf; its length or -1. */
static ssize_t slurp(const char *dir, const char *file, char *buf, size_t size)
{
	char path[600];
	ssize_t n;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -1;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/* A file holding one number (or "max", which is none: 0); -1 when unreadable. */
static int64_t read_number(const char *dir, const char *file)
{
	char buf[64], *end;
	unsigned long long v;

	if (slurp(dir, file, buf, sizeof(buf)) <= 0)
		return -1;
	if (strncmp(buf, "max", 3) == 0)
		return 0;
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (errno || end == buf)
		return -1;
	return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* The value after "key" (then ' ' or '=') on the line starting with line_key, or -1:
 * "usage_usec 123" is (usage_usec, usage_usec); "some avg10=.. total=9" (some, total). */
static int64_t read_field(const char *dir, const char *file, const char *line_key, const char *key)
{
	char buf[4096];
	size_t lk = strlen(line_key), k = strlen(key);

	if (slurp(dir, file, buf, sizeof(buf)) <= 0)
		return -1;
	for (char *line = buf; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		if (strncmp(line, line_key, lk) != 0 || (line[lk] != ' ' && line[lk] != '='))
			continue;
		for (char *p = line; *p && *p != '\n'; p++) {
			bool at_word = p == line || p[-1] == ' ';
			if (at_word && strncmp(p, key, k) == 0 && (p[k] == ' ' || p[k] == '='))
				return (int64_t)strtoll(p + k + 1, NULL, 10);
		}
	}
	return -1;
}

static int v2_usage(const char *dir, struct cgbox_usage *u)
{
	if ((u->memory_bytes = read_number(dir, "memory.current")) < 0)
		return -1;
	u->memory_limit_bytes = read_number(dir, "memory.max");
	u->cpu_usage_us = read_field(dir, "cpu.stat", "usage_usec", "usage_usec");
	u->io_wait_us = read_field(dir, "io.pressure", "some", "total");
	u->oom_kills = read_field(dir, "memory.events", "oom_kill", "oom_kill");
	return 0;
}

static int v1_usage(const struct cgbox_layout *lo, const char *parent, const char *name,
		    struct cgbox_usage *u)
{
	char dir[512];
	int64_t ns;

	if (cgbox_path(lo, CGBOX_MEMORY, parent, name, dir, sizeof(dir)) < 0 ||
	    (u->memory_bytes = read_number(dir, "memory.usage_in_bytes")) < 0)
		return -1;
	u->memory_limit_bytes = read_number(dir, "memory.limit_in_bytes");
	if (u->memory_limit_bytes >= (int64_t)V1_NO_LIMIT)
		u->memory_limit_bytes = 0;
	u->oom_kills = read_field(dir, "memory.oom_control", "oom_kill", "oom_kill");
	if (cgbox_path(lo, CGBOX_CPUACCT, parent, name, dir, sizeof(dir)) == 0 &&
	    (ns = read_number(dir, "cpuacct.usage")) >= 0)
		u->cpu_usage_us = ns / 1000;
	if (cgbox_path(lo, CGBOX_UNIFIED, parent, name, dir, sizeof(dir)) == 0) {
		if (u->cpu_usage_us < 0)
			u->cpu_usage_us = read_field(dir, "cpu.stat", "usage_usec", "usage_usec");
		u->io_wait_us = read_field(dir, "io.pressure", "some", "total");
	}
	return 0;
}

int cgbox_usage(const struct cgbox_layout *lo, const char *parent, const char *name,
		struct cgbox_usage *u)
{
	char dir[512];

	*u = (struct cgbox_usage){-1, -1, -1, -1, -1};
	if (lo->mode == CGBOX_V1)
		return v1_usage(lo, parent, name, u);
	if (cgbox_path(lo, 0, parent, name, dir, sizeof(dir)) < 0)
		return -1;
	return v2_usage(dir, u);
}

int sandbox_usage(const struct sandbox_handle *h, struct sandbox_usage *u)
{
	const struct cgbox_layout *lo = cgbox_host();
	struct sandbox_state st;
	struct cgbox_usage c;

	*u = (struct sandbox_usage){-1, -1, -1, -1, -1};
	if (!lo || !h->state_path[0] || sandbox_state_load(h->state_path, &st) < 0 ||
	    cgbox_usage(lo, st.cgroup_parent, st.id, &c) < 0)
		return -1;
	*u = (struct sandbox_usage){c.cpu_usage_us, c.memory_bytes, c.memory_limit_bytes,
				    c.io_wait_us, c.oom_kills};
	return 0;
}
