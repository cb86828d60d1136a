/* start.c - sandbox_start: the supervisor's side of building a sandbox, as named steps.
 *
 * Like nsjail's containProc(), starting is a list of steps, each a short function that
 * calls into the module owning that concern (spec.c, state.c, home.c, cgbox.c, the
 * child in child.c), and the first that fails stops the start with its name:
 *
 *   spec -> state -> run-dir -> home -> masks -> devices -> environment -> cgroups ->
 *   clone -> id-maps -> cgroup-attach -> release -> filter -> limits -> network ->
 *   record -> go -> child (the child's steps, child.c, until the command's exec)
 *
 * home comes before cgroups because the io limit names the home's loop device; the
 * state file comes before anything is taken, so gc finds whatever a crash leaves.  The
 * child is cloned into its cgroups (cgbox_birth_enter); after release it builds its
 * file system while limits, network and record run here, and it starts the command
 * only after go.  LABD_SANDBOX_TIMINGS=1 prints each step's time (timing.h).
 * What a step says failed is held (fail.h) and logged once as
 * "sandbox <id>: step <name>: <what>"; everything taken is then released by the same
 * teardown sandbox_destroy() uses.  See docs/sandbox.md, "Start-up steps".
 */
#include "labd/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "labd/fault.h"
#include "labd/gpucaps.h"
#include "labd/gpudev.h"
#include "labd/log.h"
#include "sandbox/cgbox.h"
#include "sandbox/child.h"
#include "sandbox/egress.h"
#include "sandbox/netpeer.h"
#include "sandbox/fail.h"
#include "sandbox/home.h"
#include "sandbox/homeguard.h"
#include "sandbox/homescratch.h"
#include "sandbox/rundir.h"
#include "sandbox/secfilter.h"
#include "sandbox/state.h"
#include "sandbox/teardown.h"
#include "sandbox/timing.h"

/* The environment handed to the child: strings packed here, pointed at by envp. */
struct env_store {
	char buf[16384];
	size_t used;
};

/* One start in progress: everything the steps fill and the failure path releases.
 * Allocated (it is large), owned by sandbox_start_err(). */
struct start {
	const struct sandbox_spec *spec;
	struct sandbox_handle *h;
	uint32_t host_uid;
	struct child_args child; /* the child works on a copy made by clone() */
	struct env_store env;
	struct cgbox_limits lim;
	struct sandbox_state st;
	bool have_state;
	char img_dir[SANDBOX_PATH_MAX];
	int sync_p[2], err_p[2], status_p[2]; /* -1 when closed */
	int filter_fd; /* memfd of the seccomp program (step_filter), -1 when closed */
	int null_fd;   /* /dev/null for the child's SANDBOX_FD_NULL slots, -1 when closed */
	struct cgbox_birth birth; /* the cgroups the child is cloned into (cgbox.h) */
	bool into_taken;          /* clone3 placed it in birth.into_fd's cgroup */
	pid_t pid;
	char child_step[SANDBOX_STEP_MAX]; /* the step the child reported failing */
	struct timing timing;              /* LABD_SANDBOX_TIMINGS (timing.h) */
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int step_spec(struct start *c)
{
	const struct sandbox_spec *s = c->spec;
	struct child_args *a = &c->child;

	if (sandbox_spec_check(s) < 0)
		return -1;
	c->host_uid = s->uid_base + s->user_id;
	a->inner_uid = s->inner_uid;
	a->user = s->user;
	a->image = s->image;
	a->argv = s->argv;
	a->tmp_bytes = s->tmp_bytes;
	a->shm_bytes = s->shm_bytes ? s->shm_bytes : (s->mem_bytes ? s->mem_bytes / 2 : 1ull << 30);
	a->nofile = s->nofile;
	a->die_with_parent = s->die_with_parent;
	a->parent = getpid();
	a->stdio[0] = s->stdin_fd;
	a->stdio[1] = s->stdout_fd;
	a->stdio[2] = s->stderr_fd;
	snprintf(a->home_dst, sizeof(a->home_dst), "/home/%s", s->user);
	a->cwd = s->cwd ? s->cwd : a->home_dst;
	if (s->net == SANDBOX_NET_EGRESS)
		return egress_resolv_conf(s->state_dir, a->resolv_conf, sizeof(a->resolv_conf));
	return 0;
}

/* Names the sandbox and records it before anything is taken. */
static int step_state(struct start *c)
{
	const struct sandbox_spec *s = c->spec;
	struct sandbox_state *st = &c->st;
	unsigned char r[6];

	if (getrandom(r, sizeof(r), 0) != sizeof(r))
		return fail_errno("getrandom");
	snprintf(c->h->id, sizeof(c->h->id), "%s-%02x%02x%02x%02x%02x%02x", s->user, r[0], r[1],
		 r[2], r[3], r[4], r[5]);
	snprintf(st->id, sizeof(st->id), "%s", c->h->id);
	snprintf(st->user, sizeof(st->user), "%s", s->user);
	snprintf(st->cgroup_parent, sizeof(st->cgroup_parent), "%s", s->cgroup_parent);
	if (s->home_image) {
		snprintf(st->home_image, sizeof(st->home_image), "%s", s->home_image);
		home_key(s->user_id, st->home_key, sizeof(st->home_key));
	}
	st->scratch_home = s->scratch_home;
	if (s->run_dir)
		snprintf(st->run_dir, sizeof(st->run_dir), "%s", s->run_dir);
	if (sandbox_state_path(s->state_dir, c->h->id, c->h->state_path, sizeof(c->h->state_path)) < 0)
		return fail_error("state path too long");
	if (sandbox_state_save(s->state_dir, st) < 0)
		return -1;
	c->have_state = true;
	return 0;
}

/* The run dir is a small tmpfs, not a writable host directory (rundir.h). */
static int step_run_dir(struct start *c)
{
	const char *dir = c->spec->run_dir;

	if (!dir)
		return 0;
	if (rundir_mount(dir, c->host_uid) < 0)
		return -1;
	c->child.run_dir = dir;
	return 0;
}

/* A raised storage quota reaches an existing image here when it was not
 * mounted to grow online (or the kernel refused online growth after the file
 * had grown); a smaller spec never shrinks it. Offline only while no loop
 * device holds the image (attached: the caller's word, see step_home): a copy
 * of the last mount may live on in another sandbox's namespace, and resizing a
 * live ext4 from outside corrupts it. Then it grows online once mounted (late =
 * true), or at a later start. */
static int grow_to_spec(const struct sandbox_spec *s, const char *key, bool late, bool attached)
{
	struct stat st;
	uint64_t size;

	if (stat(s->home_image, &st) < 0 || late != attached)
		return 0;
	size = (uint64_t)st.st_size > s->home_size_bytes ? (uint64_t)st.st_size : s->home_size_bytes;
	if (!late)
		return home_grow(s->state_dir, key, s->home_image, size);
	if (size > (uint64_t)st.st_size &&
	    home_grow(s->state_dir, key, s->home_image, size) < 0)
		log_warn("home %s: not grown now (online growth failed): at a later start",
			 s->home_image);
	return 0;
}

/* Whether the image is attached is asked once: a mounted home is (two stat()
 * calls), else every loop device's backing file is read; after the mount it is.
 * The mount point is keyed by the user's id (home.h), as step_state recorded. */
static int step_home(struct start *c)
{
	const struct sandbox_spec *s = c->spec;
	const char *key = c->st.home_key;

	if (s->scratch_home) /* a tmpfs of the sandbox's own, bounded like its memory */
		return homescratch_make(s->state_dir, c->h->id,
					s->mem_bytes ? s->mem_bytes : s->home_size_bytes,
					c->host_uid) < 0 ||
				       homescratch_path(s->state_dir, c->h->id, c->child.home_src,
							sizeof(c->child.home_src)) < 0
			       ? -1
			       : 0;
	if (!s->home_image)
		return 0;
	bool attached = home_mounted(s->state_dir, key) || home_attached(s->home_image);

	if (home_ensure(s->home_image, s->home_size_bytes, c->host_uid) < 0 ||
	    (s->home_mmp && homeguard_mmp(s->home_image, attached) < 0) ||
	    grow_to_spec(s, key, false, attached) < 0 ||
	    home_mount_ref(s->state_dir, key, s->home_image, c->h->id) < 0 ||
	    (attached && grow_to_spec(s, key, true, true) < 0))
		return -1;
	return home_mount_path(s->state_dir, key, c->child.home_src, sizeof(c->child.home_src));
}

/* Secrets and other users' data: hidden even though the root is the host's. */
static int step_masks(struct start *c)
{
	const struct sandbox_spec *s = c->spec;
	struct child_args *a = &c->child;

	a->masks[a->n_masks++] = "/etc/shadow";
	a->masks[a->n_masks++] = "/etc/gshadow";
	a->masks[a->n_masks++] = "/root";
	a->masks[a->n_masks++] = s->state_dir;
	if (s->home_image) {
		const char *slash = strrchr(s->home_image, '/');
		snprintf(c->img_dir, sizeof(c->img_dir), "%.*s", (int)(slash - s->home_image),
			 s->home_image);
		if (c->img_dir[0])
			a->masks[a->n_masks++] = c->img_dir;
	}
	for (unsigned i = 0; i < s->n_masks; i++)
		a->masks[a->n_masks++] = s->masks[i];
	for (unsigned i = 0; i < s->n_hidden; i++)
		a->masks[a->n_masks++] = s->hidden[i];
	for (unsigned i = 0; i < s->n_ro_binds; i++)
		a->binds[a->n_binds++] = (struct sandbox_bind){s->ro_binds[i], s->ro_binds[i], true};
	for (unsigned i = 0; i < s->n_binds; i++)
		a->binds[a->n_binds++] = s->binds[i];
	return 0;
}

/* The node dir/name, seen inside at /dev/<inside>: bound, and allowed by the device
 * cgroup by its own major and minor (read here, never assumed). A node already added
 * (a card two devices live on) is added once. */
static int add_dev_at(struct start *c, const char *dir, const char *name, const char *inside,
		      bool optional)
{
	struct child_args *a = &c->child;
	struct cgbox_limits *lim = &c->lim;
	char src[SANDBOX_PATH_MAX];
	struct stat st;

	for (unsigned i = 0; i < a->n_devs; i++)
		if (strcmp(a->devs[i].name, inside) == 0)
			return 0;
	if (a->n_devs >= CHILD_MAX_DEVS || lim->n_devs >= CGBOX_MAX_DEVS)
		return fail_error("too many devices");
	snprintf(src, sizeof(src), "%s/%s", dir, name);
	if (lstat(src, &st) < 0) {
		if (optional && errno == ENOENT)
			return 0;
		return fail_errno("device %s", src);
	}
	if (!S_ISCHR(st.st_mode))
		return fail_error("device %s: not a character device", src);
	snprintf(a->devs[a->n_devs].src, sizeof(a->devs[0].src), "%s", src);
	snprintf(a->devs[a->n_devs].name, sizeof(a->devs[0].name), "%s", inside);
	a->n_devs++;
	lim->devs[lim->n_devs++] = (struct cgbox_dev){'c', major(st.st_rdev), minor(st.st_rdev)};
	return 0;
}

static int add_dev(struct start *c, const char *dir, const char *name, bool optional)
{
	return add_dev_at(c, dir, name, name, optional);
}

/* The cap node of card d's GPU instance (ci = GPUCAPS_CI_NONE) or compute instance, as
 * the driver's capability file names it, at /dev/nvidia-caps/nvidia-cap<N> inside. */
static int add_cap(struct start *c, const struct gpudev *d, int ci)
{
	const struct sandbox_spec *s = c->spec;
	char caps_dev[SANDBOX_PATH_MAX], name[32], inside[64];
	unsigned cap;
	int rc;

	if ((rc = gpucaps_minor(s->caps_dir, d->minor, d->gi, ci, &cap)) < 0) {
		snprintf(name, sizeof(name), ci < 0 ? "%u/gi%u" : "%u/gi%u/ci%d", d->minor, d->gi,
			 ci);
		errno = -rc;
		return fail_errno("MIG instance %s in %s", name, s->caps_dir);
	}
	if (s->caps_dev_dir)
		snprintf(caps_dev, sizeof(caps_dev), "%s", s->caps_dev_dir);
	else
		snprintf(caps_dev, sizeof(caps_dev), "%s/nvidia-caps", s->dev_prefix);
	snprintf(name, sizeof(name), "nvidia-cap%u", cap);
	snprintf(inside, sizeof(inside), "nvidia-caps/%s", name);
	if (add_dev_at(c, caps_dev, name, inside, false) < 0)
		return -1;
	struct child_args *a = &c->child;
	a->caps_dir = s->caps_dir;
	if (a->n_caps_files < sizeof(a->caps_files) / sizeof(a->caps_files[0]))
		snprintf(a->caps_files[a->n_caps_files++], sizeof(a->caps_files[0]),
			 ci < 0 ? "gpu%u/mig/gi%u/access" : "gpu%u/mig/gi%u/ci%d/access", d->minor,
			 d->gi, ci);
	return 0;
}

/* Each device's card node (a share and a whole card alike: time-slicing is the driver's
 * default), a MIG instance's two cap nodes, then the driver's control nodes. */
static int add_gpus(struct start *c)
{
	const struct sandbox_spec *s = c->spec;
	char name[32];
	struct gpudev d;

	c->child.gpu = true;
	for (unsigned i = 0; i < s->n_gpus; i++) {
		if (!gpudev_decode(s->gpus[i], &d))
			return fail_error("gpu %u is no device id", s->gpus[i]);
		snprintf(name, sizeof(name), "nvidia%u", d.minor);
		if (add_dev(c, s->dev_prefix, name, false) < 0)
			return -1;
		if (d.kind == GPUDEV_MIG &&
		    (add_cap(c, &d, GPUCAPS_CI_NONE) < 0 || add_cap(c, &d, (int)d.ci) < 0))
			return -1;
	}
	/* not nvidia-modeset: only displays need it */
	if (add_dev(c, s->dev_prefix, "nvidiactl", true) < 0 ||
	    add_dev(c, s->dev_prefix, "nvidia-uvm", true) < 0 ||
	    add_dev(c, s->dev_prefix, "nvidia-uvm-tools", true) < 0)
		return -1;
	return 0;
}

/* The minimal set of device nodes, then exactly the allotted GPUs. */
static int step_devices(struct start *c)
{
	static const char *const std_devs[] = {"null", "zero", "full", "random", "urandom", "tty"};

	c->lim.devices = true;
	for (size_t i = 0; i < sizeof(std_devs) / sizeof(std_devs[0]); i++)
		if (add_dev(c, "/dev", std_devs[i], false) < 0)
			return -1;
	c->lim.devs[c->lim.n_devs++] = (struct cgbox_dev){'c', 5, 2};     /* /dev/pts/ptmx */
	c->lim.devs[c->lim.n_devs++] = (struct cgbox_dev){'c', 136, ~0u}; /* /dev/pts/N */
	/* the caller names the driver's libraries for GPU sandboxes, on an image or the
	 * host's root alike (a stand-in GPU has no node but the same libraries) */
	c->child.driver_lib_dir = c->spec->driver_lib_dir;
	return c->spec->n_gpus ? add_gpus(c) : 0;
}

static int env_add(struct start *c, unsigned *n, const char *kv)
{
	struct env_store *es = &c->env;
	size_t len = strlen(kv) + 1;

	if (*n >= CHILD_MAX_ENV || es->used + len > sizeof(es->buf))
		return fail_error("environment too large");
	memcpy(es->buf + es->used, kv, len);
	c->child.envp[(*n)++] = es->buf + es->used;
	c->child.envp[*n] = NULL;
	es->used += len;
	return 0;
}

/* "name=" and one entry per device, comma-separated: the uuids (uuid = true), the
 * host's device ids in their text form (host = true: "3", "3/gi1/ci0"), or 0..n-1. */
static int env_add_gpu_list(struct start *c, unsigned *n, const char *name, bool host,
			    bool uuid)
{
	const struct sandbox_spec *s = c->spec;
	char kv[SANDBOX_MAX_GPUS * (GPUCAPS_UUID_MAX + 1) + 32], text[GPUDEV_TEXT_MAX];
	size_t off = (size_t)snprintf(kv, sizeof(kv), "%s=", name);

	for (unsigned i = 0; i < s->n_gpus; i++) {
		gpudev_format(s->gpus[i], text, sizeof(text));
		int w = uuid   ? snprintf(kv + off, sizeof(kv) - off, "%s%s", i ? "," : "",
					  s->gpu_uuids[i])
			: host ? snprintf(kv + off, sizeof(kv) - off, "%s%s", i ? "," : "", text)
			       : snprintf(kv + off, sizeof(kv) - off, "%s%u", i ? "," : "", i);
		if (w < 0 || (size_t)w >= sizeof(kv) - off)
			return fail_error("gpu list too long");
		off += (size_t)w;
	}
	return env_add(c, n, kv);
}

/* The nodes inside keep their host names (/dev/nvidia2), but the driver
 * enumerates only the GPUs whose node a process can open: CUDA and NVML number
 * them 0..n-1 inside, so CUDA_VISIBLE_DEVICES counts from 0 (a host minor
 * there would name no device, or another one). A MIG instance is named by its
 * uuid when the caller gives it (CUDA's one sure name for an instance), every
 * device alike then. NVIDIA_VISIBLE_DEVICES says which host devices they are. */
static int env_add_gpus(struct start *c, unsigned *n)
{
	bool uuids = c->spec->gpu_uuids[0] != NULL;

	if (env_add_gpu_list(c, n, "CUDA_VISIBLE_DEVICES", false, uuids) < 0 ||
	    env_add_gpu_list(c, n, "NVIDIA_VISIBLE_DEVICES", true, false) < 0)
		return -1;
	return 0;
}

/* Whether the spec's own entries carry a PATH: getenv() takes the first of two, so
 * the default must then be left out rather than added before it. */
static bool spec_sets_path(const struct sandbox_spec *s)
{
	for (char *const *e = s->envp; e && *e; e++)
		if (strncmp(*e, "PATH=", 5) == 0)
			return true;
	return false;
}

/* A clean environment, then the spec's extra entries. */
static int step_env(struct start *c)
{
	const struct sandbox_spec *s = c->spec;
	char kv[SANDBOX_PATH_MAX + 64];
	unsigned n = 0;

	snprintf(kv, sizeof(kv), "HOME=%s", c->child.home_dst);
	if (env_add(c, &n, kv) < 0)
		return -1;
	snprintf(kv, sizeof(kv), "USER=%s", s->user);
	if (env_add(c, &n, kv) < 0 || env_add(c, &n, "LOGNAME=labd") < 0 ||
	    (!spec_sets_path(s) &&
	     env_add(c, &n, "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin") < 0) ||
	    env_add(c, &n, "LANG=C.UTF-8") < 0 || env_add(c, &n, "SHELL=/bin/sh") < 0)
		return -1;
	if (s->n_gpus && env_add_gpus(c, &n) < 0)
		return -1;
	if (s->driver_lib_dir && env_add(c, &n, "LD_LIBRARY_PATH=" SANDBOX_DRIVER_LIB_INSIDE) < 0)
		return -1;
	for (char *const *e = s->envp; e && *e; e++) {
		if (!strchr(*e, '=') || **e == '=')
			return fail_error("bad environment entry: %s", *e);
		if (env_add(c, &n, *e) < 0)
			return -1;
	}
	return 0;
}

/* The cgroups only: the child is cloned into them (step_clone); their limits follow
 * in step_limits. */
static int step_cgroups(struct start *c)
{
	const struct cgbox_layout *lo = cgbox_host();

	if (!lo)
		return fail_error("no usable cgroup hierarchy");
	return cgbox_make(lo, c->spec->cgroup_parent, c->h->id);
}

/* The limits, written while the child builds its file system: the command, the
 * first thing in the sandbox that is not labd's code, starts only after step_go. */
static int step_limits(struct start *c)
{
	const struct sandbox_spec *s = c->spec;
	struct cgbox_limits *lim = &c->lim;
	struct stat st;

	lim->mem_bytes = s->mem_bytes;
	lim->cpu_milli = s->cpu_milli;
	lim->pids_max = s->pids_max;
	lim->io_weight = s->io_weight;
	lim->io_write_bytes_per_s = s->io_write_bytes_per_s;
	if (s->io_write_bytes_per_s && c->child.home_src[0] && stat(c->child.home_src, &st) == 0) {
		lim->io_major = major(st.st_dev);
		lim->io_minor = minor(st.st_dev);
	}
	return cgbox_limit(cgbox_host(), s->cgroup_parent, c->h->id, lim);
}

/* The root's tree, cloned here in the host's namespace: that recursive clone skips
 * unbindable mounts with all below them, so each other user's home (under its
 * directory's unbindable bind, home.c) stays out of this sandbox, and its loop device
 * detaches at its own last unmount. In the child's namespace, a copy, the mark is
 * gone and the copied mounts are locked. Private all the way down: a shared host root
 * must not make the sandbox's mounts propagate back. */
static int clone_root(struct start *c)
{
	struct mount_attr attr = {.propagation = MS_PRIVATE};
	int fd = open_tree(AT_FDCWD, c->child.image,
			   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);

	if (fd < 0)
		return fail_errno("clone root %s", c->child.image);
	if (mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0) {
		close(fd);
		return fail_errno("make the root %s private", c->child.image);
	}
	c->child.root_fd = fd;
	return 0;
}

/* clone3 into the sandbox's v2 (or hybrid unified) cgroup; where the kernel or a
 * seccomp filter around labd refuses that, the plain clone of old, and the cgroup is
 * attached in cgroup-attach. */
static pid_t clone_child(struct start *c)
{
	const uint64_t ns = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC |
			    CLONE_NEWUTS;
	struct clone_args ca = {.flags = ns | CLONE_INTO_CGROUP, .exit_signal = SIGCHLD};
	pid_t pid;

	if (c->birth.into_fd >= 0) {
		ca.cgroup = (uint64_t)c->birth.into_fd;
		pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
		if (pid >= 0) {
			c->into_taken = true;
			return pid;
		}
	}
	return (pid_t)syscall(SYS_clone, ns | SIGCHLD, NULL, NULL, NULL, NULL);
}

/* /dev/null for the child's stdio slots that ask for it, opened here before the clone:
 * the child is born in its cgroups and step_limits writes the v1 devices list while the
 * child still sets up (deny "a" first, then each allow), so an open of /dev/null in the
 * child could fall between the two and fail with EPERM on a loaded host. */
static int open_null(struct start *c)
{
	struct child_args *a = &c->child;

	for (int i = 0; i < 3; i++) {
		if (a->stdio[i] != SANDBOX_FD_NULL)
			continue;
		if (c->null_fd < 0 && (c->null_fd = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
			return fail_errno("open /dev/null");
		a->stdio[i] = c->null_fd;
	}
	return 0;
}

/* The child is born in its cgroups (cgbox_birth_enter): no process move, whose
 * first one after a quiet moment waits out an RCU grace period. */
static int step_clone(struct start *c)
{
	const struct cgbox_layout *lo = cgbox_host();
	int e;

	if (!lo)
		return fail_error("no usable cgroup hierarchy");
	/* sync is a socket so that send(MSG_NOSIGNAL) to a dead child is EPIPE, not a
	 * SIGPIPE that kills the supervisor */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c->sync_p) < 0 ||
	    pipe2(c->err_p, O_CLOEXEC) < 0 || pipe2(c->status_p, O_CLOEXEC) < 0 ||
	    (c->filter_fd = memfd_create("labd-seccomp", MFD_CLOEXEC)) < 0)
		return fail_errno("pipe");
	c->child.sync_fd = c->sync_p[0];
	c->child.err_fd = c->err_p[1];
	c->child.status_fd = c->status_p[1];
	c->child.filter_fd = c->filter_fd;
	if (open_null(c) < 0 || clone_root(c) < 0)
		return -1;
	if (cgbox_birth_enter(lo, c->spec->cgroup_parent, c->h->id, &c->birth) < 0) {
		close(c->child.root_fd);
		return -1;
	}
	c->pid = clone_child(c);
	e = errno;
	if (c->pid == 0)
		child_main(&c->child);
	close(c->child.root_fd);
	if (cgbox_birth_leave(lo, &c->birth) < 0)
		return -1; /* abandon() kills the child */
	if (c->pid < 0) {
		errno = e;
		return fail_errno("clone");
	}
	close_fd(&c->sync_p[0]);
	close_fd(&c->err_p[1]);
	close_fd(&c->status_p[1]);
	c->h->pid = c->pid;
	c->h->is_child = true;
	c->st.pid = c->pid;
	c->st.start_time_ticks = sandbox_proc_start_ticks(c->pid);
	c->h->start_time_ticks = c->st.start_time_ticks;
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
		return fail_errno("open %s", path);
	if (write(fd, buf, (size_t)n) != n) {
		fail_errno("write %s", path);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* Inside uid/gid inner_uid is host uid_base + user_id, and nothing else is mapped: an
 * escaped process owns nothing of another user or of root. */
static int step_id_maps(struct start *c)
{
	if (write_map(c->pid, "uid_map", c->spec->inner_uid, c->host_uid) < 0 ||
	    write_map(c->pid, "gid_map", c->spec->inner_uid, c->host_uid) < 0)
		return -1;
	return 0;
}

/* What the child did not get at birth (step_clone); nothing, mostly. */
static int step_cgroup_attach(struct start *c)
{
	return cgbox_attach_rest(cgbox_host(), c->spec->cgroup_parent, c->h->id, c->pid, &c->birth,
				 c->into_taken);
}

/* Egress: root's ruleset in the namespace, then pasta, while the child builds its
 * file system; the command starts only after step_go (egress.c).  The child binds
 * the resolv.conf naming pasta's DNS address. */
static int step_network(struct start *c)
{
	const struct sandbox_spec *s = c->spec;

	if (s->net == SANDBOX_NET_EGRESS && egress_start(s, c->h->id, c->pid, c->st.start_time_ticks) < 0)
		return -1;
	/* the peer interface, with either network (netpeer.c) */
	return netpeer_start(s, c->pid, c->st.start_time_ticks);
}

/* The state file learns init's pid and start time: adopt and gc can find it now. */
static int step_record(struct start *c)
{
	return sandbox_state_save(c->spec->state_dir, &c->st);
}

/* Waits for the child's steps: EOF on err_p means the command has been exec'd, a
 * report names the child's step that failed (child.c). */
static int step_child(struct start *c)
{
	char buf[SANDBOX_STEP_MAX + SANDBOX_MESSAGE_MAX], msg[SANDBOX_MESSAGE_MAX];
	ssize_t n;

	do
		n = read(c->err_p[0], buf, sizeof(buf));
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return fail_errno("read the child's report");
	if (n == 0)
		return 0;
	child_report_parse(buf, (size_t)n, c->child_step, sizeof(c->child_step), msg, sizeof(msg));
	return fail_error("%s", msg);
}

/* One byte on the sync socket: the child goes on (child.c, wait-parent, wait-go).
 * A child that is gone has said why on its error pipe, unless it was killed. */
static int let_go(struct start *c, bool last)
{
	int e;

	if (send(c->sync_p[1], "g", 1, MSG_NOSIGNAL) == 1) {
		if (last)
			close_fd(&c->sync_p[1]);
		return 0;
	}
	e = errno;
	if (step_child(c) < 0)
		return -1;
	errno = e;
	return fail_errno("release the child");
}

/* The uid maps are written and the child is in its cgroups: it builds its file system
 * meanwhile the limits, the network and the record are done. */
static int step_release(struct start *c)
{
	return let_go(c, false);
}

/* The seccomp program (secfilter.h), built into the memfd the child shares while the
 * child builds its file system (the longer of the two); it loads it after go. */
static int step_filter(struct start *c)
{
	int rc = secfilter_export(c->filter_fd);

	close_fd(&c->filter_fd);
	return rc < 0 ? fail_errno("build the seccomp filter") : 0;
}

/* Everything is in place: the child may start the command. */
static int step_go(struct start *c)
{
	return let_go(c, true);
}

static const struct start_step {
	const char *name;
	int (*run)(struct start *c);
} start_steps[] = {
	{"spec", step_spec},
	{"state", step_state},
	{"run-dir", step_run_dir},
	{"home", step_home},
	{"masks", step_masks},
	{"devices", step_devices},
	{"environment", step_env},
	{"cgroups", step_cgroups},
	{"clone", step_clone},
	{"id-maps", step_id_maps},
	{"cgroup-attach", step_cgroup_attach},
	{"release", step_release},
	{"filter", step_filter},
	{"limits", step_limits},
	{"network", step_network},
	{"record", step_record},
	{"go", step_go},
	{"child", step_child}, /* named by the child's report when it fails */
};
#define N_START_STEPS (sizeof(start_steps) / sizeof(start_steps[0]))
_Static_assert(N_START_STEPS <= TIMING_MAX_STEPS, "timing.h holds every start step");

/* How long a failed parent step waits for the child's own report. */
#define CHILD_REPORT_WAIT_MS 250

/* A parent step that failed because the child had already died (pasta finds no
 * namespace to join): the child's own report says why, and names its step.  The
 * child's namespaces go before it can be waited for, so a dying child is not yet
 * waitable when the parent's step fails: the report is waited for, briefly.  A
 * child that did not fail writes nothing before its exec, so the wait ends at its
 * bound, on a failure path only. */
static void prefer_child_report(struct start *c, char *why, size_t len)
{
	char buf[SANDBOX_STEP_MAX + SANDBOX_MESSAGE_MAX];
	struct pollfd p = {.fd = c->err_p[0], .events = POLLIN};
	ssize_t n;

	if (c->pid <= 0 || c->err_p[0] < 0 || c->child_step[0] ||
	    poll(&p, 1, CHILD_REPORT_WAIT_MS) != 1 || !(p.revents & POLLIN))
		return;
	do
		n = read(c->err_p[0], buf, sizeof(buf));
	while (n < 0 && errno == EINTR);
	if (n > 0)
		child_report_parse(buf, (size_t)n, c->child_step, sizeof(c->child_step), why, len);
}

static const char *start_step_name(size_t i)
{
	return i < N_START_STEPS ? start_steps[i].name : NULL;
}

/* Runs the steps in order; on a failure fills *err and logs it once. */
static int run_steps(struct start *c, struct sandbox_error *err)
{
	char why[SANDBOX_MESSAGE_MAX - 64];
	const char *failed = NULL;

	fail_hold(why, sizeof(why));
	timing_begin(&c->timing);
	c->child.times = c->timing.child;
	for (size_t i = 0; i < N_START_STEPS && !failed; i++) {
		if (start_steps[i].run(c) < 0)
			failed = start_steps[i].name;
		FAULT_POINT_STEP("sandbox.start", start_steps[i].name);
		if (c->timing.on)
			c->timing.parent_end_ns[i] = timing_now_ns();
	}
	fail_release();
	timing_end(&c->timing, c->h->id, start_step_name, child_step_name);
	if (!failed)
		return 0;
	prefer_child_report(c, why, sizeof(why));
	if (c->child_step[0])
		failed = c->child_step;
	snprintf(err->step, sizeof(err->step), "%s", failed);
	snprintf(err->message, sizeof(err->message), "step %s: %s", failed, why[0] ? why : "failed");
	log_error("sandbox%s%s: %s", c->h->id[0] ? " " : "", c->h->id, err->message);
	return -1;
}

static void handle_reset(struct sandbox_handle *h)
{
	memset(h, 0, sizeof(*h));
	h->status_fd = -1;
	h->pid = -1;
}

/* After a failed step: releases everything taken, in the opposite order. */
static void abandon(struct start *c)
{
	const struct cgbox_layout *lo = cgbox_host();

	if (lo)
		cgbox_birth_leave(lo, &c->birth); /* idempotent: done unless clone failed halfway */
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
	}
	close_fd(&c->status_p[0]);
	if (c->have_state)
		teardown_sandbox(c->spec->state_dir, &c->st);
	handle_reset(c->h);
}

int sandbox_start_err(const struct sandbox_spec *spec, struct sandbox_handle *h,
		      struct sandbox_error *err)
{
	struct sandbox_error none;
	struct start *c;
	int rc;

	handle_reset(h);
	err = err ? err : &none;
	memset(err, 0, sizeof(*err));
	if (!(c = calloc(1, sizeof(*c)))) {
		snprintf(err->step, sizeof(err->step), "spec");
		snprintf(err->message, sizeof(err->message), "step spec: out of memory");
		return log_error("sandbox: %s", err->message);
	}
	c->spec = spec;
	c->h = h;
	for (int i = 0; i < 2; i++)
		c->sync_p[i] = c->err_p[i] = c->status_p[i] = -1;
	c->filter_fd = c->null_fd = -1;
	c->birth.into_fd = -1;
	rc = run_steps(c, err);
	if (rc < 0) {
		abandon(c);
	} else {
		h->status_fd = c->status_p[0];
		c->status_p[0] = -1;
		if (spec->verbose)
			log_info("sandbox %s: started, init pid %d", h->id, (int)h->pid);
	}
	for (int i = 0; i < 2; i++) {
		close_fd(&c->sync_p[i]);
		close_fd(&c->err_p[i]);
		close_fd(&c->status_p[i]);
	}
	close_fd(&c->filter_fd);
	close_fd(&c->null_fd);
	free(c);
	return rc;
}

int sandbox_start(const struct sandbox_spec *spec, struct sandbox_handle *h)
{
	return sandbox_start_err(spec, h, NULL);
}
