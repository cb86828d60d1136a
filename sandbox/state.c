/* state.c - sandbox state files; see state.h. */
#include "sandbox/state.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/fail.h"
#include "sandbox/parse.h"

#define STATE_MAX 65536

int sandbox_state_format(const struct sandbox_state *st, char *buf, size_t size)
{
	int n = snprintf(buf, size,
			 "version=1\nid=%s\nuser=%s\npid=%d\nstart_time=%" PRIu64
			 "\nhome_image=%s\nhome_key=%s\nrun_dir=%s\ncgroup_parent=%s\n%s",
			 st->id, st->user, (int)st->pid, st->start_time_ticks, st->home_image,
			 st->home_key, st->run_dir, st->cgroup_parent,
			 st->scratch_home ? "scratch_home=1\n" : "");
	if (n < 0 || (size_t)n >= size)
		return -1;
	return n;
}

static int set_str(char *dst, size_t size, const char *v, size_t vlen)
{
	if (vlen >= size || memchr(v, '\0', vlen))
		return -1;
	memcpy(dst, v, vlen);
	dst[vlen] = '\0';
	return 0;
}

static int set_u64(uint64_t *dst, const char *v, size_t vlen, uint64_t max)
{
	char tmp[32];
	char *end;
	unsigned long long x;

	if (vlen == 0 || vlen >= sizeof(tmp))
		return -1;
	memcpy(tmp, v, vlen);
	tmp[vlen] = '\0';
	if (tmp[0] < '0' || tmp[0] > '9')
		return -1;
	errno = 0;
	x = strtoull(tmp, &end, 10);
	if (errno || *end || x > max)
		return -1;
	*dst = x;
	return 0;
}

int sandbox_state_parse(const char *text, size_t len, struct sandbox_state *st)
{
	const char *p = text, *end = text + len;
	bool seen_version = false;

	memset(st, 0, sizeof(*st));
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eq;
		size_t klen, vlen;
		const char *v;
		int rc = -1;

		if (!nl)
			return -1; /* every line ends with a newline: a torn write is refused */
		eq = memchr(p, '=', (size_t)(nl - p));
		if (!eq)
			return -1;
		klen = (size_t)(eq - p);
		v = eq + 1;
		vlen = (size_t)(nl - v);
#define KEY(k) (klen == sizeof(k) - 1 && memcmp(p, k, klen) == 0)
		if (KEY("version")) {
			rc = (vlen == 1 && v[0] == '1') ? 0 : -1;
			seen_version = true;
		} else if (KEY("id")) {
			rc = set_str(st->id, sizeof(st->id), v, vlen);
		} else if (KEY("user")) {
			rc = set_str(st->user, sizeof(st->user), v, vlen);
		} else if (KEY("pid")) {
			uint64_t x = 0; /* set_u64 leaves it unset when it refuses */
			rc = set_u64(&x, v, vlen, 4194304);
			st->pid = (pid_t)x;
		} else if (KEY("start_time")) {
			rc = set_u64(&st->start_time_ticks, v, vlen, UINT64_MAX);
		} else if (KEY("home_image")) {
			rc = set_str(st->home_image, sizeof(st->home_image), v, vlen);
		} else if (KEY("home_key")) {
			rc = set_str(st->home_key, sizeof(st->home_key), v, vlen);
		} else if (KEY("run_dir")) {
			rc = set_str(st->run_dir, sizeof(st->run_dir), v, vlen);
		} else if (KEY("scratch_home")) {
			rc = vlen == 1 && v[0] == '1' ? 0 : -1;
			st->scratch_home = true;
		} else if (KEY("cgroup_parent")) {
			rc = set_str(st->cgroup_parent, sizeof(st->cgroup_parent), v, vlen);
		}
#undef KEY
		if (rc < 0)
			return -1;
		p = nl + 1;
	}
	if (!seen_version || !st->id[0] || !st->user[0] || !st->cgroup_parent[0])
		return -1;
	if (!st->home_key[0]) /* the release before mounted homes by user name */
		snprintf(st->home_key, sizeof(st->home_key), "%s", st->user);
	/* ids, user names and cgroup names become path components */
	if (strchr(st->id, '/') || strchr(st->cgroup_parent, '/') || strchr(st->user, '/') ||
	    strchr(st->home_key, '/') || st->id[0] == '.' || st->cgroup_parent[0] == '.' ||
	    st->user[0] == '.' || st->home_key[0] == '.')
		return -1;
	return 0;
}

bool sandbox_state_path_under(const char *state_dir, const char *path)
{
	size_t n = strlen(state_dir);
	const char *p;

	if (!state_dir[0] || strncmp(path, state_dir, n) != 0 || path[n] != '/')
		return false;
	/* each component after the prefix: not empty, ".", or ".." */
	for (p = path + n; *p == '/'; ) {
		const char *c = p + 1, *next = strchr(c, '/');
		size_t len = next ? (size_t)(next - c) : strlen(c);
		if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!next)
			return true;
		p = next;
	}
	return false;
}

/* The state dir of a state file: the path without "/sandboxes/<file>". */
static int state_dir_of_file(const char *path, char *buf, size_t size)
{
	const char *file = strrchr(path, '/');
	const char *dir = file;

	while (dir && dir > path && dir[-1] != '/')
		dir--;
	if (!file || !dir || dir == path || strncmp(dir, "sandboxes/", 10) != 0 ||
	    (size_t)(dir - 1 - path) >= size)
		return -1;
	snprintf(buf, size, "%.*s", (int)(dir - 1 - path), path);
	return 0;
}

static bool confined;
static char images[SANDBOX_PATH_MAX];

void sandbox_state_confine(const char *images_dir)
{
	confined = true;
	snprintf(images, sizeof(images), "%s", images_dir);
}

/* A state file names host paths that root later unmounts and removes: each
 * must lie under the state dir the file itself is in, or a forged file could
 * have root remove any tree. */
static int check_paths(const char *path, const struct sandbox_state *st)
{
	char dir[SANDBOX_PATH_MAX];

	if (!confined)
		return 0;
	if (state_dir_of_file(path, dir, sizeof(dir)) < 0)
		return fail_error("state file %s is not in a sandboxes/ directory", path);
	if (st->home_image[0] && !sandbox_state_path_under(dir, st->home_image) &&
	    !sandbox_state_path_under(images, st->home_image))
		return fail_error("state file %s: home_image %s is outside %s: refused", path,
				  st->home_image, dir);
	if (st->run_dir[0] && !sandbox_state_path_under(dir, st->run_dir))
		return fail_error("state file %s: run_dir %s is outside %s: refused", path,
				  st->run_dir, dir);
	return 0;
}

int sandbox_state_path(const char *state_dir, const char *id, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/sandboxes/%s.state", state_dir, id);
	return (n < 0 || (size_t)n >= size) ? -1 : 0;
}

int sandbox_state_save(const char *state_dir, const struct sandbox_state *st)
{
	char path[SANDBOX_PATH_MAX], tmp[SANDBOX_PATH_MAX + 8], dir[SANDBOX_PATH_MAX];
	char buf[3 * SANDBOX_PATH_MAX];
	int fd = -1, rc = -1, len;

	if (snprintf(dir, sizeof(dir), "%s/sandboxes", state_dir) >= (int)sizeof(dir))
		return fail_error("state dir too long");
	if (mkdir(state_dir, 0700) < 0 && errno != EEXIST)
		return fail_errno("mkdir %s", state_dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return fail_errno("mkdir %s", dir);
	if (sandbox_state_path(state_dir, st->id, path, sizeof(path)) < 0)
		return fail_error("state path too long");
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if ((len = sandbox_state_format(st, buf, sizeof(buf))) < 0)
		return fail_error("state of %s too large", st->id);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return fail_errno("open %s", tmp);
	/* No fsync: the file is there for a crash of labd (the page cache keeps it), and
	 * a crash of the machine ends every sandbox and what it held but its files; a
	 * file lost with it leaves at most an empty run dir that the next start reuses.
	 * Two fsyncs were 0.4-6 ms of each start, more as the disk got busier. */
	if (write(fd, buf, (size_t)len) != len) {
		fail_errno("write %s", tmp);
		goto out;
	}
	if (rename(tmp, path) < 0) {
		fail_errno("rename %s", tmp);
		goto out;
	}
	rc = 0;
out:
	close(fd);
	if (rc < 0)
		unlink(tmp);
	return rc;
}

int sandbox_state_load(const char *path, struct sandbox_state *st)
{
	char *buf = malloc(STATE_MAX);
	ssize_t n = -1;
	size_t len = 0;
	int fd, rc = -1;

	if (!buf)
		return fail_errno("malloc");
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		fail_errno("open %s", path);
		goto out;
	}
	while (len < STATE_MAX && (n = read(fd, buf + len, STATE_MAX - len)) > 0)
		len += (size_t)n;
	close(fd);
	if (n < 0 || len >= STATE_MAX) {
		fail_error("read %s: error or too large", path);
		goto out;
	}
	if (sandbox_state_parse(buf, len, st) < 0) {
		fail_error("parse %s: malformed state file", path);
		goto out;
	}
	if (check_paths(path, st) < 0)
		goto out;
	rc = 0;
out:
	free(buf);
	return rc;
}

uint64_t sandbox_proc_start_ticks(pid_t pid)
{
	char path[64], buf[1024];
	const char *p;
	uint64_t ticks;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* a zombie (its parent died and the host's init has not reaped it yet) is gone */
	p = strrchr(buf, ')');
	if (!p || (p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X')))
		return 0;
	if (sandbox_parse_stat_field(buf, 22, &ticks) < 0)
		return 0;
	return ticks;
}

bool sandbox_state_alive(const struct sandbox_state *st)
{
	return st->pid > 0 && st->start_time_ticks &&
	       sandbox_proc_start_ticks(st->pid) == st->start_time_ticks;
}
