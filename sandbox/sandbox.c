/* sandbox.c - the supervisor side of a sandbox: start, wait, kill, destroy, adopt, gc.
 * See include/labd/sandbox.h and docs/sandbox.md. */
#include "labd/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "sandbox/cgbox.h"
#include "sandbox/home.h"
#include "labd/log.h"
#include "sandbox/parse.h"
#include "sandbox/state.h"

#define DEFAULT_STATE_DIR "/var/lib/labd"

void sandbox_spec_init(struct sandbox_spec *s)
{
	memset(s, 0, sizeof(*s));
	s->uid_base = 200000;
	s->inner_uid = 1000;
	s->home_size = 15ull << 30;
	s->tmp_bytes = 1ull << 30;
	s->nofile = 4096;
	s->net = SANDBOX_NET_NONE;
	s->dev_prefix = "/dev";
	s->image = "/";
	s->state_dir = DEFAULT_STATE_DIR;
	s->cgroup_parent = "labd";
}

static bool abs_path_ok(const char *p)
{
	return p && p[0] == '/' && strlen(p) < SANDBOX_PATH_MAX - 64 && !strstr(p, "/../") &&
	       !strstr(p, "\n");
}

int sandbox_spec_check(const struct sandbox_spec *s)
{
	uint64_t host = (uint64_t)s->uid_base + s->user_id;

	if (!sandbox_user_name_ok(s->user))
		return log_error("bad user name: %s", s->user ? s->user : "(none)");
	if (s->uid_base < 1000 || host > 0xfffffffeull || s->inner_uid == 0 || s->inner_uid > 65533)
		return log_error("bad uid range: base %u user id %u inner %u", s->uid_base, s->user_id,
				 s->inner_uid);
	if (!s->argv || !s->argv[0])
		return log_error("no command");
	if (s->net != SANDBOX_NET_NONE)
		return log_error("network mode egress is not built yet");
	if (!abs_path_ok(s->image) || !abs_path_ok(s->state_dir) || !abs_path_ok(s->dev_prefix))
		return log_error("image, state dir and device prefix must be absolute paths");
	if ((s->home_image && !abs_path_ok(s->home_image)) || (s->run_dir && !abs_path_ok(s->run_dir)) ||
	    (s->driver_lib_dir && !abs_path_ok(s->driver_lib_dir)))
		return log_error("home image, run dir and driver dir must be absolute paths");
	if (!s->cgroup_parent || !s->cgroup_parent[0] || strchr(s->cgroup_parent, '/') ||
	    s->cgroup_parent[0] == '.')
		return log_error("bad cgroup parent");
	if (s->n_gpus > SANDBOX_MAX_GPUS || s->n_masks > SANDBOX_MAX_MASKS)
		return log_error("too many gpus or masks");
	for (unsigned i = 0; i < s->n_masks; i++)
		if (!abs_path_ok(s->masks[i]))
			return log_error("bad mask path");
	if (s->tmp_bytes < 4096 || s->nofile < 16 || s->nofile > (1u << 20))
		return log_error("tmp size or nofile out of range");
	if (s->home_image && s->home_size < (16ull << 20))
		return log_error("home size below 16 MiB");
	return 0;
}

static const struct cgbox_layout *layout(void)
{
	static struct cgbox_layout lo;
	static int state; /* 0 unknown, 1 ok, -1 failed */
	if (state == 0)
		state = cgbox_detect(&lo) == 0 ? 1 : -1;
	return state == 1 ? &lo : NULL;
}

static int add_dev(struct child_args *a, struct cgbox_limits *lim, const char *dir, const char *name,
		   bool optional)
{
	char src[SANDBOX_PATH_MAX];
	struct stat st;

	if (a->n_devs >= CHILD_MAX_DEVS || lim->n_devs >= CGBOX_MAX_DEVS)
		return log_error("too many devices");
	snprintf(src, sizeof(src), "%s/%s", dir, name);
	if (lstat(src, &st) < 0) {
		if (optional && errno == ENOENT)
			return 0;
		return log_errno("device %s", src);
	}
	if (!S_ISCHR(st.st_mode))
		return log_error("device %s: not a character device", src);
	snprintf(a->devs[a->n_devs].src, sizeof(a->devs[0].src), "%s", src);
	snprintf(a->devs[a->n_devs].name, sizeof(a->devs[0].name), "%s", name);
	a->n_devs++;
	lim->devs[lim->n_devs++] = (struct cgbox_dev){'c', major(st.st_rdev), minor(st.st_rdev)};
	return 0;
}

/* Static storage for the environment handed to the child (copied before clone). */
struct env_store {
	char buf[16384];
	size_t used;
};

static int env_add(struct child_args *a, struct env_store *es, unsigned *n, const char *kv)
{
	size_t len = strlen(kv) + 1;
	if (*n >= CHILD_MAX_ENV || es->used + len > sizeof(es->buf))
		return log_error("environment too large");
	memcpy(es->buf + es->used, kv, len);
	a->envp[(*n)++] = es->buf + es->used;
	a->envp[*n] = NULL;
	es->used += len;
	return 0;
}

static int build_env(const struct sandbox_spec *s, struct child_args *a, struct env_store *es)
{
	char kv[SANDBOX_PATH_MAX + 64], list[256];
	unsigned n = 0;
	size_t off = 0;

	snprintf(kv, sizeof(kv), "HOME=%s", a->home_dst);
	if (env_add(a, es, &n, kv) < 0)
		return -1;
	snprintf(kv, sizeof(kv), "USER=%s", s->user);
	if (env_add(a, es, &n, kv) < 0 || env_add(a, es, &n, "LOGNAME=labd") < 0)
		return -1;
	if (env_add(a, es, &n, "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin") < 0 ||
	    env_add(a, es, &n, "LANG=C.UTF-8") < 0 || env_add(a, es, &n, "SHELL=/bin/sh") < 0)
		return -1;
	if (s->n_gpus) {
		list[0] = '\0';
		for (unsigned i = 0; i < s->n_gpus; i++) {
			int w = snprintf(list + off, sizeof(list) - off, "%s%u", i ? "," : "", s->gpus[i]);
			if (w < 0 || (size_t)w >= sizeof(list) - off)
				return log_error("gpu list too long");
			off += (size_t)w;
		}
		/* the devices inside keep their host minors, so the host's numbering applies */
		snprintf(kv, sizeof(kv), "CUDA_VISIBLE_DEVICES=%s", list);
		if (env_add(a, es, &n, kv) < 0)
			return -1;
		snprintf(kv, sizeof(kv), "NVIDIA_VISIBLE_DEVICES=%s", list);
		if (env_add(a, es, &n, kv) < 0)
			return -1;
		if (s->driver_lib_dir && env_add(a, es, &n, "LD_LIBRARY_PATH=/run/nvidia/lib") < 0)
			return -1;
	}
	for (char *const *e = s->envp; e && *e; e++) {
		if (!strchr(*e, '=') || **e == '=')
			return log_error("bad environment entry: %s", *e);
		if (env_add(a, es, &n, *e) < 0)
			return -1;
	}
	return 0;
}

static int write_map(pid_t pid, const char *file, uint32_t inner, uint32_t host)
{
	char path[64], buf[64];
	int fd, n;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	n = snprintf(buf, sizeof(buf), "%u %u 1\n", inner, host);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return log_errno("open %s", path);
	if (write(fd, buf, (size_t)n) != n) {
		close(fd);
		return log_errno("write %s", path);
	}
	close(fd);
	return 0;
}

/* Removes a directory tree without following any symlink: the run dir was writable
 * from inside, so it may hold links planted to make the host delete its own files. */
static int remove_tree_at(int at, const char *name, int depth)
{
	int fd;
	DIR *d;
	struct dirent *e;

	if (depth > 64)
		return -1;
	if (unlinkat(at, name, 0) == 0 || errno == ENOENT)
		return 0;
	fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		remove_tree_at(dirfd(d), e->d_name, depth + 1);
	}
	closedir(d);
	return unlinkat(at, name, AT_REMOVEDIR);
}

static int remove_tree(const char *path)
{
	char parent[SANDBOX_PATH_MAX];
	const char *base = strrchr(path, '/');
	int fd, rc;

	if (!base || !base[1])
		return -1;
	snprintf(parent, sizeof(parent), "%.*s", (int)(base - path), path);
	fd = open(parent[0] ? parent : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	rc = remove_tree_at(fd, base + 1, 0);
	close(fd);
	return rc < 0 && errno != ENOENT ? -1 : 0;
}

static bool state_alive(const struct sandbox_state *st)
{
	return st->pid > 0 && st->start_time_ticks && sandbox_proc_start_ticks(st->pid) == st->start_time_ticks;
}

/* Releases everything st records.  Idempotent: safe after a partial start or a crash. */
static int teardown(const char *state_dir, const struct sandbox_state *st)
{
	const struct cgbox_layout *lo = layout();
	char path[SANDBOX_PATH_MAX];
	int rc = 0;

	if (state_alive(st))
		kill(st->pid, SIGKILL); /* init dies, and the kernel kills its pid namespace */
	if (lo) {
		if (cgbox_kill(lo, st->cgroup_parent, st->id) < 0)
			rc = -1;
		if (cgbox_remove(lo, st->cgroup_parent, st->id) < 0)
			rc = -1;
	}
	if (st->home_image[0] && home_unref(state_dir, st->user, st->id) < 0)
		rc = -1;
	if (st->run_dir[0] && remove_tree(st->run_dir) < 0)
		rc = log_errno("remove run dir %s", st->run_dir);
	if (sandbox_state_path(state_dir, st->id, path, sizeof(path)) == 0 && unlink(path) < 0 &&
	    errno != ENOENT)
		rc = log_errno("unlink %s", path);
	return rc;
}

static int state_dir_of(const char *state_path, char *buf, size_t size)
{
	const char *p = strstr(state_path, "/sandboxes/");
	if (!p || (size_t)(p - state_path) >= size)
		return -1;
	snprintf(buf, size, "%.*s", (int)(p - state_path), state_path);
	return 0;
}

int sandbox_start(const struct sandbox_spec *s, struct sandbox_handle *h)
{
	static struct child_args a; /* large: kept off the stack; the child works on a copy */
	static struct env_store es;
	const struct cgbox_layout *lo;
	struct cgbox_limits lim;
	struct sandbox_state st;
	uint32_t host_uid = s->uid_base + s->user_id;
	int sync_p[2] = {-1, -1}, err_p[2] = {-1, -1}, status_p[2] = {-1, -1};
	unsigned char rnd[6];
	char errbuf[1024];
	ssize_t n;
	pid_t pid = -1;
	bool have_state = false;

	memset(h, 0, sizeof(*h));
	h->status_fd = -1;
	h->pid = -1;
	if (sandbox_spec_check(s) < 0)
		return -1;
	if (!(lo = layout()))
		return log_error("no usable cgroup hierarchy");
	memset(&a, 0, sizeof(a));
	memset(&es, 0, sizeof(es));
	memset(&lim, 0, sizeof(lim));
	memset(&st, 0, sizeof(st));

	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return log_errno("getrandom");
	snprintf(h->id, sizeof(h->id), "%s-%02x%02x%02x%02x%02x%02x", s->user, rnd[0], rnd[1], rnd[2],
		 rnd[3], rnd[4], rnd[5]);
	snprintf(st.id, sizeof(st.id), "%s", h->id);
	snprintf(st.user, sizeof(st.user), "%s", s->user);
	snprintf(st.cgroup_parent, sizeof(st.cgroup_parent), "%s", s->cgroup_parent);
	if (s->home_image)
		snprintf(st.home_image, sizeof(st.home_image), "%s", s->home_image);
	if (s->run_dir)
		snprintf(st.run_dir, sizeof(st.run_dir), "%s", s->run_dir);
	sandbox_state_path(s->state_dir, h->id, h->state_path, sizeof(h->state_path));
	/* recorded before anything is taken, so gc finds whatever a crash leaves */
	if (sandbox_state_save(s->state_dir, &st) < 0)
		return -1;
	have_state = true;

	a.inner_uid = s->inner_uid;
	a.user = s->user;
	a.image = s->image;
	a.argv = s->argv;
	a.tmp_bytes = s->tmp_bytes;
	a.shm_bytes = s->shm_bytes ? s->shm_bytes : (s->mem_bytes ? s->mem_bytes / 2 : 1ull << 30);
	a.nofile = s->nofile;
	a.die_with_parent = s->die_with_parent;
	a.parent = getpid();
	snprintf(a.home_dst, sizeof(a.home_dst), "/home/%s", s->user);
	a.cwd = s->cwd ? s->cwd : a.home_dst;

	if (s->run_dir) {
		struct stat rst;
		if (mkdir(s->run_dir, 0700) < 0 && errno != EEXIST) {
			log_errno("mkdir %s", s->run_dir);
			goto fail;
		}
		if (lstat(s->run_dir, &rst) < 0 || !S_ISDIR(rst.st_mode)) {
			log_error("run dir %s: not a directory", s->run_dir);
			goto fail;
		}
		if (lchown(s->run_dir, host_uid, host_uid) < 0) {
			log_errno("chown %s", s->run_dir);
			goto fail;
		}
		a.run_dir = s->run_dir;
	}
	if (s->home_image) {
		if (home_ensure(s->home_image, s->home_size, host_uid) < 0 ||
		    home_mount_ref(s->state_dir, s->user, s->home_image, h->id) < 0)
			goto fail;
		home_mount_path(s->state_dir, s->user, a.home_src, sizeof(a.home_src));
	}

	/* secrets and other users' data: hidden even though the root is the host's */
	a.masks[a.n_masks++] = "/etc/shadow";
	a.masks[a.n_masks++] = "/etc/gshadow";
	a.masks[a.n_masks++] = "/root";
	a.masks[a.n_masks++] = s->state_dir;
	if (s->home_image) {
		static char img_dir[SANDBOX_PATH_MAX];
		const char *slash = strrchr(s->home_image, '/');
		snprintf(img_dir, sizeof(img_dir), "%.*s", (int)(slash - s->home_image), s->home_image);
		if (img_dir[0])
			a.masks[a.n_masks++] = img_dir;
	}
	for (unsigned i = 0; i < s->n_masks; i++)
		a.masks[a.n_masks++] = s->masks[i];

	/* devices: the minimal set, then exactly the allotted GPUs */
	lim.devices = true;
	{
		static const char *const std_devs[] = {"null", "zero", "full", "random", "urandom", "tty"};
		for (size_t i = 0; i < sizeof(std_devs) / sizeof(std_devs[0]); i++)
			if (add_dev(&a, &lim, "/dev", std_devs[i], false) < 0)
				goto fail;
		lim.devs[lim.n_devs++] = (struct cgbox_dev){'c', 5, 2};   /* /dev/pts/ptmx */
		lim.devs[lim.n_devs++] = (struct cgbox_dev){'c', 136, ~0u}; /* /dev/pts/N */
	}
	if (s->n_gpus) {
		char name[32];
		a.gpu = true;
		for (unsigned i = 0; i < s->n_gpus; i++) {
			snprintf(name, sizeof(name), "nvidia%u", s->gpus[i]);
			if (add_dev(&a, &lim, s->dev_prefix, name, false) < 0)
				goto fail;
		}
		/* not nvidia-modeset: only displays need it */
		if (add_dev(&a, &lim, s->dev_prefix, "nvidiactl", true) < 0 ||
		    add_dev(&a, &lim, s->dev_prefix, "nvidia-uvm", true) < 0 ||
		    add_dev(&a, &lim, s->dev_prefix, "nvidia-uvm-tools", true) < 0)
			goto fail;
		if (s->driver_lib_dir && strcmp(s->image, "/") != 0)
			a.driver_lib_dir = s->driver_lib_dir;
	}
	if (build_env(s, &a, &es) < 0)
		goto fail;

	lim.mem_bytes = s->mem_bytes;
	lim.cpu_milli = s->cpu_milli;
	lim.pids_max = s->pids_max;
	lim.io_weight = s->io_weight;
	lim.io_write_bytes_per_s = s->io_write_bytes_per_s;
	if (s->io_write_bytes_per_s && a.home_src[0]) {
		struct stat hst;
		if (stat(a.home_src, &hst) == 0) {
			lim.io_major = major(hst.st_dev);
			lim.io_minor = minor(hst.st_dev);
		}
	}
	if (cgbox_create(lo, s->cgroup_parent, h->id, &lim) < 0)
		goto fail;

	/* sync is a socket so that send(MSG_NOSIGNAL) to a dead child is EPIPE, not a
	 * SIGPIPE that kills the supervisor */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync_p) < 0 || pipe2(err_p, O_CLOEXEC) < 0 || pipe2(status_p, O_CLOEXEC) < 0) {
		log_errno("pipe");
		goto fail;
	}
	a.sync_fd = sync_p[0];
	a.err_fd = err_p[1];
	a.status_fd = status_p[1];
	pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET |
					     CLONE_NEWIPC | CLONE_NEWUTS | SIGCHLD,
			     NULL, NULL, NULL, NULL);
	if (pid < 0) {
		log_errno("clone");
		goto fail;
	}
	if (pid == 0)
		child_main(&a);

	close(sync_p[0]);
	close(err_p[1]);
	close(status_p[1]);
	sync_p[0] = err_p[1] = status_p[1] = -1;
	h->pid = pid;
	h->is_child = true;
	st.pid = pid;
	st.start_time_ticks = sandbox_proc_start_ticks(pid);
	h->start_time_ticks = st.start_time_ticks;
	/* inside uid/gid inner_uid is host uid_base + user_id, and nothing else is mapped:
	 * an escaped process owns nothing of another user or of root */
	if (write_map(pid, "uid_map", s->inner_uid, host_uid) < 0 ||
	    write_map(pid, "gid_map", s->inner_uid, host_uid) < 0 ||
	    cgbox_attach(lo, s->cgroup_parent, h->id, pid) < 0 || sandbox_state_save(s->state_dir, &st) < 0)
		goto fail;
	if (send(sync_p[1], "g", 1, MSG_NOSIGNAL) != 1) {
		log_errno("release sandbox child");
		goto fail;
	}
	close(sync_p[1]);
	sync_p[1] = -1;
	n = read(err_p[0], errbuf, sizeof(errbuf) - 1);
	if (n > 0) {
		errbuf[n] = '\0';
		log_error("sandbox %s: %s", h->id, errbuf);
		goto fail;
	}
	close(err_p[0]);
	h->status_fd = status_p[0];
	if (s->verbose)
		log_info("sandbox %s: started, init pid %d", h->id, (int)pid);
	return 0;

fail:
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	for (int *fd = &sync_p[0]; fd <= &sync_p[1]; fd++)
		if (*fd >= 0)
			close(*fd);
	if (err_p[0] >= 0)
		close(err_p[0]);
	if (err_p[1] >= 0)
		close(err_p[1]);
	if (status_p[0] >= 0)
		close(status_p[0]);
	if (status_p[1] >= 0)
		close(status_p[1]);
	if (have_state)
		teardown(s->state_dir, &st);
	memset(h, 0, sizeof(*h));
	h->status_fd = -1;
	h->pid = -1;
	return -1;
}

int sandbox_wait(struct sandbox_handle *h, struct sandbox_result *res)
{
	const struct cgbox_layout *lo = layout();
	struct sandbox_state st;
	int status = 0, cmd_status;
	bool have_cmd = false;

	memset(res, 0, sizeof(*res));
	res->kind = SANDBOX_UNKNOWN;
	if (h->pid <= 0)
		return log_error("sandbox %s: no process", h->id);
	if (h->is_child) {
		while (waitpid(h->pid, &status, 0) < 0) {
			if (errno != EINTR)
				return log_errno("waitpid %d", (int)h->pid);
		}
		if (h->status_fd >= 0 && read(h->status_fd, &cmd_status, sizeof(cmd_status)) == sizeof(cmd_status))
			have_cmd = true;
		if (!have_cmd)
			cmd_status = status;
		if (WIFEXITED(cmd_status)) {
			res->kind = SANDBOX_EXITED;
			res->code = WEXITSTATUS(cmd_status);
		} else {
			res->kind = SANDBOX_SIGNALED;
			res->signal = WTERMSIG(cmd_status);
		}
	} else {
		int pfd = (int)syscall(SYS_pidfd_open, h->pid, 0);
		if (pfd >= 0 && sandbox_proc_start_ticks(h->pid) == h->start_time_ticks) {
			struct pollfd p = {pfd, POLLIN, 0};
			while (poll(&p, 1, -1) < 0 && errno == EINTR) {
			}
		}
		if (pfd >= 0)
			close(pfd);
	}
	if (lo && sandbox_state_load(h->state_path, &st) == 0) {
		res->oom_kills = cgbox_oom_kills(lo, st.cgroup_parent, st.id);
		/* a SIGKILL with a fresh OOM kill in our memory cgroup is the OOM killer's */
		if (res->oom_kills > 0 && (res->kind == SANDBOX_UNKNOWN ||
					   (res->kind == SANDBOX_SIGNALED && res->signal == SIGKILL)))
			res->kind = SANDBOX_OOM;
	}
	return 0;
}

int sandbox_kill(struct sandbox_handle *h, int sig)
{
	struct sandbox_state st;
	const struct cgbox_layout *lo = layout();

	if (h->pid <= 0 || sandbox_proc_start_ticks(h->pid) != h->start_time_ticks)
		return 0; /* already gone (or the pid was reused: not ours) */
	if (sig != SIGKILL)
		return kill(h->pid, sig) < 0 ? log_errno("kill %d", (int)h->pid) : 0;
	if (!lo || sandbox_state_load(h->state_path, &st) < 0)
		return kill(h->pid, SIGKILL);
	kill(h->pid, SIGKILL);
	return cgbox_kill(lo, st.cgroup_parent, st.id);
}

void sandbox_handle_clear(struct sandbox_handle *h)
{
	if (h->status_fd >= 0)
		close(h->status_fd);
	memset(h, 0, sizeof(*h));
	h->status_fd = -1;
	h->pid = -1;
}

int sandbox_destroy(struct sandbox_handle *h)
{
	struct sandbox_state st;
	char state_dir[SANDBOX_PATH_MAX];
	int rc = 0;

	if (h->state_path[0] && sandbox_state_load(h->state_path, &st) == 0 &&
	    state_dir_of(h->state_path, state_dir, sizeof(state_dir)) == 0) {
		rc = teardown(state_dir, &st);
	}
	if (h->is_child && h->pid > 0) {
		kill(h->pid, SIGKILL);
		waitpid(h->pid, NULL, WNOHANG);
	}
	sandbox_handle_clear(h);
	return rc;
}

int sandbox_adopt(const char *state_dir, const char *id, struct sandbox_handle *h)
{
	struct sandbox_state st;

	memset(h, 0, sizeof(*h));
	h->status_fd = -1;
	if (strchr(id, '/') || sandbox_state_path(state_dir, id, h->state_path, sizeof(h->state_path)) < 0)
		return log_error("bad sandbox id %s", id);
	if (sandbox_state_load(h->state_path, &st) < 0)
		return -1;
	if (!state_alive(&st))
		return log_error("sandbox %s: no longer running", id);
	snprintf(h->id, sizeof(h->id), "%s", st.id);
	h->pid = st.pid;
	h->start_time_ticks = st.start_time_ticks;
	return 0;
}

struct gc_ctx {
	const char *state_dir;
};

static bool holder_live(const char *holder, void *arg)
{
	struct gc_ctx *g = arg;
	struct sandbox_state st;
	char path[SANDBOX_PATH_MAX];

	if (sandbox_state_path(g->state_dir, holder, path, sizeof(path)) < 0)
		return false;
	if (access(path, F_OK) < 0)
		return false;
	/* a state file of a sandbox still starting (pid 0) keeps its reference */
	return sandbox_state_load(path, &st) == 0 && (st.pid == 0 || state_alive(&st));
}

int sandbox_gc(const char *state_dir, bool all)
{
	char dir[SANDBOX_PATH_MAX], path[SANDBOX_PATH_MAX * 2];
	struct gc_ctx g = {state_dir};
	struct dirent *e;
	int cleaned = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/sandboxes", state_dir);
	d = opendir(dir);
	if (!d && errno != ENOENT)
		return log_errno("opendir %s", dir);
	while (d && (e = readdir(d))) {
		struct sandbox_state st;
		size_t len = strlen(e->d_name);
		if (len < 7 || strcmp(e->d_name + len - 6, ".state") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (sandbox_state_load(path, &st) < 0) {
			log_warn("gc: removing unreadable state file %s", path);
			unlink(path);
			continue;
		}
		if (!all && state_alive(&st))
			continue;
		if (!all && st.pid == 0) {
			/* starting, or its starter died before clone: gone if the file is old */
			struct stat sst;
			if (stat(path, &sst) == 0 && sst.st_mtime + 60 > time(NULL))
				continue;
		}
		log_info("gc: tearing down sandbox %s", st.id);
		teardown(state_dir, &st);
		cleaned++;
	}
	if (d)
		closedir(d);
	if (home_gc(state_dir, holder_live, &g) < 0)
		return -1;
	return cleaned;
}
