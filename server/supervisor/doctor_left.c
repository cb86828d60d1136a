/* doctor_left.c - what a crash of labd left under its state dir, and its removal.
 *
 * A sandbox is live when its state file (sandboxes/<id>.state) names an init that
 * runs: its home, run dir, cgroups, pasta, keeper and records are labd's, kept
 * across labd's restarts (keep_on_shutdown) and re-adopted. Everything else is a
 * leftover: a state file whose init is gone, a mount under the state dir that no
 * live sandbox uses, a loop device on a file there that nothing mounts, a cgroup
 * (and its processes) or a pasta of a sandbox that is not live, a keeper socket
 * or a record (boxes/, pools/) naming one. */
#include "supervisor/doctor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/loop.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "labd/log.h"
#include "labd/sandbox.h"
#include "labd/str.h"

#define LEFT_PATH_MAX 4096
#define LEFT_BOXES_MAX 512
#define LEFT_REMEDY "labd doctor --fix (with labd stopped)"

struct box {
	char id[128], user[64], home_key[64], run_dir[LEFT_PATH_MAX], cgroup_parent[72];
	long pid;
	bool live, recorded; /* recorded: a record (boxes/, pools/) names it */
};

struct scan {
	const char *state_dir, *cgroup_parent;
	bool labd_runs, fix;
	struct box boxes[LEFT_BOXES_MAX];
	int n_boxes, left;
};

static bool pid_runs(long pid)
{
	char path[64], buf[512];
	FILE *f;
	char *p;
	bool runs = false;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if (pid <= 0 || !(f = fopen(path, "r")))
		return false;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) && p[1] == ' ')
		runs = p[2] != 'Z' && p[2] != 'X';
	fclose(f);
	return runs;
}

static void comm_of(long pid, char *out, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(out, len, "?");
	snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
	if ((f = fopen(path, "r"))) {
		if (fgets(out, (int)len, f))
			out[strcspn(out, "\n")] = '\0';
		fclose(f);
	}
}

static void left(struct scan *s, const char *fmt, const char *a, const char *b)
{
	char what[LEFT_PATH_MAX * 2];

	s->left++;
	if (s->fix)
		return; /* the pass after the repair lists what remains */
	snprintf(what, sizeof(what), fmt, a, b);
	doctor_say(DOCTOR_LEFT, LEFT_REMEDY, "leftover: %s", what);
}

/* One sandboxes/<id>.state file: key=value lines (sandbox/state.c). */
static void read_state(struct scan *s, const char *path)
{
	char line[LEFT_PATH_MAX + 32];
	struct box *b = &s->boxes[s->n_boxes];
	long pid = 0;
	FILE *f = fopen(path, "r");

	if (!f || s->n_boxes == LEFT_BOXES_MAX) {
		if (f)
			fclose(f);
		return;
	}
	memset(b, 0, sizeof(*b));
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "id=", 3) == 0)
			str_copy(b->id, sizeof(b->id), line + 3);
		else if (strncmp(line, "user=", 5) == 0)
			str_copy(b->user, sizeof(b->user), line + 5);
		else if (strncmp(line, "home_key=", 9) == 0)
			str_copy(b->home_key, sizeof(b->home_key), line + 9);
		else if (strncmp(line, "run_dir=", 8) == 0)
			str_copy(b->run_dir, sizeof(b->run_dir), line + 8);
		else if (strncmp(line, "cgroup_parent=", 14) == 0)
			str_copy(b->cgroup_parent, sizeof(b->cgroup_parent), line + 14);
		else if (strncmp(line, "pid=", 4) == 0)
			pid = strtol(line + 4, NULL, 10);
	}
	fclose(f);
	if (!b->home_key[0]) /* the release before mounted homes by user name */
		str_copy(b->home_key, sizeof(b->home_key), b->user);
	b->pid = pid;
	/* a start still before its clone has pid 0: live while labd runs */
	b->live = pid_runs(pid) || (pid == 0 && s->labd_runs);
	if (!b->id[0])
		return;
	s->n_boxes++;
	if (!b->live)
		left(s, "sandbox %s of %s: its init is gone (state file left)", b->id, b->user);
}

static void read_states(struct scan *s)
{
	char dir[LEFT_PATH_MAX], path[LEFT_PATH_MAX + 256];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/sandboxes", s->state_dir);
	if (!(d = opendir(dir)))
		return;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n > 6 && strcmp(e->d_name + n - 6, ".state") == 0) {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			read_state(s, path);
		}
	}
	closedir(d);
}

static const struct box *live_box(const struct scan *s, const char *id)
{
	for (int i = 0; i < s->n_boxes; i++)
		if (s->boxes[i].live && strcmp(s->boxes[i].id, id) == 0)
			return &s->boxes[i];
	return NULL;
}

static bool known_box(const struct scan *s, const char *id)
{
	for (int i = 0; i < s->n_boxes; i++)
		if (strcmp(s->boxes[i].id, id) == 0)
			return true;
	return false;
}

/* Whether mp is the home mount under state_dir/kind/key or the unbindable bind
 * of its directory that holds it (sandbox/home.c, sandbox/homescratch.c). */
static bool home_mount(const struct scan *s, const char *mp, const char *kind, const char *key)
{
	char dir[LEFT_PATH_MAX + 160], home[LEFT_PATH_MAX + 192];

	snprintf(dir, sizeof(dir), "%s/%s/%s", s->state_dir, kind, key);
	snprintf(home, sizeof(home), "%s/mnt", dir);
	return strcmp(mp, dir) == 0 || strcmp(mp, home) == 0;
}

/* A mount a live sandbox uses: its user's home, or the scratch home a job's host past
 * the first has instead (named by the sandbox), or its run dir. */
static bool mount_in_use(const struct scan *s, const char *mp)
{
	for (int i = 0; i < s->n_boxes; i++) {
		const struct box *b = &s->boxes[i];
		if (!b->live)
			continue;
		if (home_mount(s, mp, "homes", b->home_key) || home_mount(s, mp, "scratch", b->id) ||
		    (b->run_dir[0] && strcmp(mp, b->run_dir) == 0))
			return true;
	}
	return false;
}

/* Each mount under the state dir (deepest last, as mountinfo lists them) and each
 * device mounted anywhere in this namespace ("/dev/loopN" ...), by callback. */
static void each_mount(const char *under, void (*fn)(void *ctx, const char *mp, const char *src),
		       void *ctx)
{
	char line[LEFT_PATH_MAX * 2], mp[LEFT_PATH_MAX], src[LEFT_PATH_MAX];
	size_t n = strlen(under);
	FILE *f = fopen("/proc/self/mountinfo", "r");

	while (f && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - ");
		if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1 ||
		    sscanf(sep + 3, "%*s %4095s", src) != 1)
			continue;
		if (!under[0] || (strncmp(mp, under, n) == 0 && (mp[n] == '/' || !mp[n])))
			fn(ctx, mp, src);
	}
	if (f)
		fclose(f);
}

static void check_mount(void *ctx, const char *mp, const char *src)
{
	struct scan *s = ctx;

	(void)src;
	if (strcmp(mp, s->state_dir) == 0 || mount_in_use(s, mp))
		return;
	if (s->fix && umount2(mp, MNT_DETACH) == 0) {
		doctor_say(DOCTOR_FIXED, NULL, "unmounted %s", mp);
		return;
	}
	/* a home's directory bind, detached just above, took its home along */
	if (s->fix && errno == EINVAL)
		return;
	left(s, "mount %s%s", mp, "");
}

struct loop_ctx {
	const char *dev;
	bool mounted;
};

static void is_source(void *ctx, const char *mp, const char *src)
{
	struct loop_ctx *l = ctx;

	(void)mp;
	if (strcmp(src, l->dev) == 0)
		l->mounted = true;
}

static void detach_loop(struct scan *s, const char *dev, const char *backing)
{
	int fd = open(dev, O_RDWR | O_CLOEXEC);

	if (fd >= 0 && ioctl(fd, LOOP_CLR_FD, 0) == 0) {
		close(fd);
		doctor_say(DOCTOR_FIXED, NULL, "detached loop device %s (%s)", dev, backing);
		return;
	}
	if (fd >= 0)
		close(fd);
	left(s, "loop device %s on %s, mounted nowhere here", dev, backing);
}

/* A loop device mounted in another mount namespace: a sandbox (of any labd on this
 * host) made while the home was mounted holds a copy of that mount until it ends,
 * and the loop device is freed then (it is autoclear). Said, not counted. */
static bool held_elsewhere(const struct scan *s, const char *dev, const char *backing)
{
	char path[64], line[LEFT_PATH_MAX * 2], comm[32], needle[320];
	struct dirent *e;
	DIR *d = opendir("/proc");
	long holder = 0;

	snprintf(needle, sizeof(needle), " %s ", dev);
	while (d && !holder && (e = readdir(d))) {
		long pid = strtol(e->d_name, NULL, 10);
		FILE *f;
		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/mountinfo", pid);
		if (!(f = fopen(path, "r")))
			continue;
		while (!holder && fgets(line, sizeof(line), f))
			if (strstr(line, needle))
				holder = pid;
		fclose(f);
	}
	if (d)
		closedir(d);
	if (!holder || s->fix)
		return holder != 0;
	comm_of(holder, comm, sizeof(comm));
	doctor_say(DOCTOR_WARN, "it is freed when that process ends",
		   "loop device %s on %s: still mounted in the mount namespace of %ld (%s)", dev,
		   backing, holder, comm);
	return true;
}

static void check_loops(struct scan *s)
{
	char path[LEFT_PATH_MAX], backing[LEFT_PATH_MAX], dev[300];
	size_t n = strlen(s->state_dir);
	struct dirent *e;
	DIR *d = opendir("/sys/block");
	FILE *f;

	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, "loop", 4) != 0)
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", e->d_name);
		if (!(f = fopen(path, "r")))
			continue;
		backing[0] = '\0';
		if (fgets(backing, sizeof(backing), f))
			backing[strcspn(backing, "\n")] = '\0';
		fclose(f);
		if (strncmp(backing, s->state_dir, n) != 0 || backing[n] != '/')
			continue;
		snprintf(dev, sizeof(dev), "/dev/%s", e->d_name);
		struct loop_ctx l = {dev, false};
		each_mount("", is_source, &l);
		if (l.mounted || held_elsewhere(s, dev, backing))
			continue;
		if (s->fix)
			detach_loop(s, dev, backing);
		else
			left(s, "loop device %s on %s, mounted nowhere here", dev, backing);
	}
	if (d)
		closedir(d);
}

struct cg_ctx {
	struct scan *s;
	const char *parent, *name;
	struct stat seen[16]; /* a hierarchy mounted twice is looked at once */
	int n_seen;
};

static bool seen_before(struct cg_ctx *c, const char *dir)
{
	struct stat st;

	if (stat(dir, &st) < 0)
		return true;
	for (int i = 0; i < c->n_seen; i++)
		if (c->seen[i].st_dev == st.st_dev && c->seen[i].st_ino == st.st_ino)
			return true;
	if (c->n_seen < 16)
		c->seen[c->n_seen++] = st;
	return false;
}

/* <hierarchy>/<parent>/<name> in one cgroup hierarchy: its processes, then itself. */
static void check_cgroup(void *ctx, const char *mp, const char *src)
{
	struct cg_ctx *c = ctx;
	char dir[LEFT_PATH_MAX + 256], procs[LEFT_PATH_MAX + 300], line[32], comm[32];
	FILE *f;

	(void)src;
	if (strncmp(mp, "/sys/fs/cgroup", 14) != 0)
		return;
	snprintf(dir, sizeof(dir), "%s/%s/%s", mp, c->parent, c->name);
	if (seen_before(c, dir))
		return;
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
	if ((f = fopen(procs, "r"))) {
		while (fgets(line, sizeof(line), f)) {
			long pid = strtol(line, NULL, 10);
			comm_of(pid, comm, sizeof(comm));
			if (c->s->fix && kill((pid_t)pid, SIGKILL) == 0)
				doctor_say(DOCTOR_FIXED, NULL, "killed %ld (%s) of %s", pid, comm, dir);
			else
				left(c->s, "process %s in the cgroup %s", comm, dir);
		}
		fclose(f);
	}
	for (int i = 0; c->s->fix && i < 50 && rmdir(dir) < 0 && errno == EBUSY; i++)
		usleep(20 * 1000); /* killed processes leave the cgroup a moment later */
	if (access(dir, F_OK) == 0)
		left(c->s, "cgroup %s%s", dir, "");
	else if (c->s->fix)
		doctor_say(DOCTOR_FIXED, NULL, "removed the cgroup %s", dir);
}

/* The cgroups (the sandbox's and its pasta's "<id>.net", under parent) and the pasta
 * of a sandbox that is not live. */
static void check_gone(struct scan *s, const char *parent, const char *id)
{
	char net[160], path[LEFT_PATH_MAX + 256], line[32], comm[32];
	FILE *f;

	struct cg_ctx box = {.s = s, .parent = parent, .name = id},
		      pasta = {.s = s, .parent = parent, .name = net};

	snprintf(net, sizeof(net), "%s.net", id);
	each_mount("/sys/fs/cgroup", check_cgroup, &box);
	each_mount("/sys/fs/cgroup", check_cgroup, &pasta);
	snprintf(path, sizeof(path), "%s/sandboxes/%s.pasta.pid", s->state_dir, id);
	if (!(f = fopen(path, "r")))
		return;
	long pid = fgets(line, sizeof(line), f) ? strtol(line, NULL, 10) : 0;
	fclose(f);
	comm_of(pid, comm, sizeof(comm));
	if (!pid_runs(pid) || strcmp(comm, "pasta") != 0)
		return;
	if (s->fix && kill((pid_t)pid, SIGKILL) == 0)
		doctor_say(DOCTOR_FIXED, NULL, "killed pasta %ld of sandbox %s", pid, id);
	else
		left(s, "pasta of sandbox %s (its network namespace) runs on%s", id, "");
}

static void remove_left(struct scan *s, const char *path, const char *what, const char *id)
{
	if (s->fix && unlink(path) == 0)
		doctor_say(DOCTOR_FIXED, NULL, "removed %s %s", what, path);
	else
		left(s, "%s names sandbox %s, which is gone", path, id);
}

/* A record (boxes/<user>.json, pools/<id>/record.json) of a sandbox that is not live. */
static void check_record(struct scan *s, const char *path)
{
	json_t *j = json_load_file(path, 0, NULL);
	const char *id = json_string_value(json_object_get(j, "id"));

	for (int i = 0; id && i < s->n_boxes; i++)
		if (strcmp(s->boxes[i].id, id) == 0)
			s->boxes[i].recorded = true;
	if (id && !live_box(s, id)) {
		if (!known_box(s, id)) /* else looked at with its state file */
			check_gone(s, s->cgroup_parent, id);
		remove_left(s, path, "the record", id);
	}
	json_decref(j);
}

static void check_records(struct scan *s, const char *sub, const char *leaf)
{
	char dir[LEFT_PATH_MAX], path[LEFT_PATH_MAX + 512];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/%s", s->state_dir, sub);
	if (!(d = opendir(dir)))
		return;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (e->d_name[0] == '.')
			continue;
		if (leaf)
			snprintf(path, sizeof(path), "%s/%s/%s", dir, e->d_name, leaf);
		else if (n > 5 && strcmp(e->d_name + n - 5, ".json") == 0)
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		else
			continue;
		if (access(path, F_OK) == 0)
			check_record(s, path);
	}
	closedir(d);
}

/* keepers/<id>.sock of a sandbox that is not live. */
static void check_keepers(struct scan *s)
{
	char dir[LEFT_PATH_MAX], path[LEFT_PATH_MAX + 256], id[128];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/keepers", s->state_dir);
	if (!(d = opendir(dir)))
		return;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n <= 5 || n - 5 >= sizeof(id) || strcmp(e->d_name + n - 5, ".sock") != 0)
			continue;
		snprintf(id, sizeof(id), "%.*s", (int)(n - 5), e->d_name);
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (!live_box(s, id))
			remove_left(s, path, "the keeper socket", id);
	}
	closedir(d);
}

/* A sandbox that runs while labd is stopped but that no record names: labd died
 * between its start and its record, and the next labd would not adopt it. */
static void check_unrecorded(struct scan *s)
{
	for (int i = 0; i < s->n_boxes && !s->labd_runs; i++) {
		struct box *b = &s->boxes[i];
		if (!b->live || b->recorded)
			continue;
		if (s->fix && kill((pid_t)b->pid, SIGKILL) == 0) {
			for (int t = 0; t < 100 && pid_runs(b->pid); t++)
				usleep(10 * 1000); /* until its parent reaped it */
			b->live = false;
			doctor_say(DOCTOR_FIXED, NULL, "killed sandbox %s, which no record named", b->id);
			continue;
		}
		left(s, "sandbox %s of %s runs, but no record names it (labd would not adopt it)",
		     b->id, b->user);
	}
}

static int scan_once(const char *state_dir, const char *cgroup_parent, bool labd_runs, bool fix)
{
	struct scan *s = calloc(1, sizeof(*s));
	int n;

	if (!s)
		return log_error("doctor: out of memory"), 1;
	s->state_dir = state_dir;
	s->cgroup_parent = cgroup_parent;
	s->labd_runs = labd_runs;
	s->fix = fix;
	if (fix && (n = sandbox_gc_unstarted(state_dir)) > 0)
		doctor_say(DOCTOR_FIXED, NULL, "tore down %d sandbox(es) whose init was gone", n);
	read_states(s);
	for (int i = 0; i < s->n_boxes; i++)
		if (!s->boxes[i].live) /* a state file of an older release names no parent */
			check_gone(s, s->boxes[i].cgroup_parent[0] ? s->boxes[i].cgroup_parent
								    : cgroup_parent,
				   s->boxes[i].id);
	check_records(s, "boxes", NULL);
	check_records(s, "pools", "record.json");
	check_unrecorded(s);
	if (fix && (n = sandbox_gc_unstarted(state_dir)) > 0) /* those just killed */
		doctor_say(DOCTOR_FIXED, NULL, "tore down %d sandbox(es) killed above", n);
	check_keepers(s);
	if ((n = sandbox_veth_leftovers(state_dir)) > 0) { /* --fix: gc above removed them */
		char count[16];
		snprintf(count, sizeof(count), "%d", n);
		left(s, "%s veth(s), host table(s) or claim(s) of sandboxes not running%s", count, "");
	}
	each_mount(state_dir, check_mount, s);
	check_loops(s);
	n = s->left;
	free(s);
	return n;
}

int doctor_leftovers(const char *state_dir, const char *cgroup_parent, bool labd_runs,
		     bool fix)
{
	if (fix)
		scan_once(state_dir, cgroup_parent, labd_runs, true);
	return scan_once(state_dir, cgroup_parent, labd_runs, false);
}
