/* mounts.c - the sandbox filesystem, built in the child's private mount namespace.
 *
 * Two phases (docs/sandbox.md, "Filesystem"): mounts_prepare() clones the host trees
 * (home, run dir, device nodes) with open_tree(OPEN_TREE_CLONE) while the child still
 * has the host root's file access (the root's tree, root_fd, the starter cloned in the
 * host's namespace: start.c, clone_root); after the switch to the inner uid,
 * mounts_build() attaches them under /tmp (the new root's mount point in this
 * namespace), adds fresh proc/sysfs/tmpfs/devpts, masks secrets and pivots.  Files
 * created in our tmpfs must belong to a uid mapped in the user namespace, which is why
 * nothing is created before the uid switch.  The root's clone is private all the way
 * down (clone_root), so nothing mounted here propagates back to the host.
 */
#include "child.h"
#include "sandbox/accounts.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NEWROOT "/tmp"

static int failf(char *msg, size_t len, const char *what, const char *path)
{
	int e = errno;
	snprintf(msg, len, "%s %s: %s", what, path, strerror(e));
	errno = e;
	return -1;
}

static int clone_tree(const char *path, bool recursive)
{
	return open_tree(AT_FDCWD, path,
			 OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0));
}

static int set_attr(int fd, uint64_t set, bool recursive)
{
	struct mount_attr attr = {.attr_set = set};
	return mount_setattr(fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &attr,
			     sizeof(attr));
}

static int attach(int *fd, const char *target)
{
	int rc = move_mount(*fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH);
	int e = errno;
	close(*fd);
	*fd = -1;
	errno = e;
	return rc;
}

/* One bind's source: a directory (a symlink is not followed: the caller named the
 * real place), nosuid and nodev, read-only when asked. */
static int clone_bind(const struct sandbox_bind *b, int *fd, char *msg, size_t len)
{
	struct stat st;

	*fd = open_tree(AT_FDCWD, b->src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
	if (*fd < 0)
		return failf(msg, len, "clone bind", b->src);
	if (fstat(*fd, &st) < 0 || !S_ISDIR(st.st_mode)) {
		errno = errno ? errno : ENOTDIR;
		return failf(msg, len, "bind source", b->src);
	}
	if (set_attr(*fd, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (b->ro ? MOUNT_ATTR_RDONLY : 0), false) < 0)
		return failf(msg, len, "bind attributes", b->src);
	return 0;
}

int mounts_prepare(const struct child_args *a, struct mount_fds *f, char *msg, size_t len)
{
	f->root = f->home = f->run = f->driver = f->resolv = -1;
	for (unsigned i = 0; i < CHILD_MAX_DEVS; i++)
		f->devs[i] = -1;
	for (unsigned i = 0; i < CHILD_MAX_BINDS; i++)
		f->binds[i] = -1;
	f->root = a->root_fd;
	if (f->root < 0)
		return failf(msg, len, "clone root", a->image);
	/* read-only, nosuid, nodev all the way down: setuid binaries give nothing */
	if (set_attr(f->root, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true) < 0)
		return failf(msg, len, "make read-only", a->image);
	if (a->home_src[0]) {
		if ((f->home = clone_tree(a->home_src, false)) < 0 ||
		    set_attr(f->home, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false) < 0)
			return failf(msg, len, "clone home", a->home_src);
	}
	if (a->run_dir) {
		if ((f->run = clone_tree(a->run_dir, false)) < 0 ||
		    set_attr(f->run, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, false) < 0)
			return failf(msg, len, "clone run dir", a->run_dir);
	}
	if (a->driver_lib_dir) {
		if ((f->driver = clone_tree(a->driver_lib_dir, false)) < 0 ||
		    set_attr(f->driver, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false) < 0)
			return failf(msg, len, "clone driver libs", a->driver_lib_dir);
	}
	for (unsigned i = 0; i < a->n_binds; i++)
		if (clone_bind(&a->binds[i], &f->binds[i], msg, len) < 0)
			return -1;
	if (a->resolv_conf[0]) {
		if ((f->resolv = clone_tree(a->resolv_conf, false)) < 0 ||
		    set_attr(f->resolv, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
						MOUNT_ATTR_NOEXEC, false) < 0)
			return failf(msg, len, "clone resolv.conf", a->resolv_conf);
	}
	for (unsigned i = 0; i < a->n_devs; i++) {
		struct stat st;
		/* the node must still be the character device the parent checked */
		if (lstat(a->devs[i].src, &st) < 0 || !S_ISCHR(st.st_mode)) {
			errno = errno ? errno : ENODEV;
			return failf(msg, len, "device", a->devs[i].src);
		}
		if ((f->devs[i] = clone_tree(a->devs[i].src, false)) < 0 ||
		    set_attr(f->devs[i], MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false) < 0)
			return failf(msg, len, "clone device", a->devs[i].src);
	}
	return 0;
}

static int mount_tmpfs(const char *target, unsigned long flags, const char *opts, char *msg, size_t len)
{
	if (mount("tmpfs", target, "tmpfs", flags, opts) < 0)
		return failf(msg, len, "mount tmpfs on", target);
	return 0;
}

static int touch(const char *path, char *msg, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return failf(msg, len, "create", path);
	close(fd);
	return 0;
}

/* The first mask of each kind, which the later ones bind (mask()); "" before it. */
static char mask_dir_src[SANDBOX_PATH_MAX + 8], mask_file_src[SANDBOX_PATH_MAX + 8];

/* Hides path (inside the new root): an empty read-only tmpfs over a directory, a
 * read-only /dev/null over anything else.  Missing paths are fine; symlinks are not
 * followed (a masked path that is a link is left as it is: its target is masked or
 * not on its own).  Only the first of each kind is made; every later one is a bind of
 * it (a bind copies the mount's ro, nosuid, nodev, noexec): one mount(2) where a new
 * tmpfs superblock, or the three calls of a cloned /dev/null, took 2-3 times as long,
 * for some 25 masks per start.  Sharing is safe: nothing can be written to either. */
static int mask(const char *path, char *msg, size_t len)
{
	char t[SANDBOX_PATH_MAX + 8];
	struct stat st;
	int fd;

	snprintf(t, sizeof(t), NEWROOT "%s", path);
	if (lstat(t, &st) < 0)
		return 0; /* absent, or unreachable for the inner uid too */
	if (S_ISLNK(st.st_mode))
		return 0;
	char *src = S_ISDIR(st.st_mode) ? mask_dir_src : mask_file_src;
	if (src[0] && mount(src, t, NULL, MS_BIND, NULL) == 0)
		return 0;
	if (S_ISDIR(st.st_mode)) {
		if (mount_tmpfs(t, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
				"size=4k,nr_inodes=1,mode=000", msg, len) < 0)
			return -1;
	} else if ((fd = clone_tree("/dev/null", false)) < 0 ||
		   set_attr(fd, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false) < 0 ||
		   attach(&fd, t) < 0) {
		return failf(msg, len, "mask", path);
	}
	snprintf(src, sizeof(mask_dir_src), "%s", t);
	return 0;
}

static int bind_ro_self(const char *path, char *msg, size_t len)
{
	char t[256];
	snprintf(t, sizeof(t), NEWROOT "%s", path);
	if (access(t, F_OK) < 0)
		return 0;
	if (mount(t, t, NULL, MS_BIND | MS_REC, NULL) < 0 ||
	    mount(NULL, t, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return failf(msg, len, "read-only bind", t);
	return 0;
}

/* Copies host file src to dst (created 0444); 0, or -1 with msg. */
static int copy_small(const char *src, const char *dst, char *msg, size_t len)
{
	char buf[16384];
	ssize_t n;
	int in, out;

	if ((in = open(src, O_RDONLY | O_CLOEXEC)) < 0)
		return failf(msg, len, "open", src);
	n = read(in, buf, sizeof(buf));
	close(in);
	if (n < 0)
		return failf(msg, len, "read", src);
	if ((out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444)) < 0)
		return failf(msg, len, "create", dst);
	if (write(out, buf, (size_t)n) != n) {
		close(out);
		return failf(msg, len, "write", dst);
	}
	close(out);
	return 0;
}

/* The MIG instances' capability files under dir/capabilities, each folder made on the
 * way (CUDA reads the cap node minor from them, as it does on the host). */
static int fake_nvidia_caps(const struct child_args *a, const char *dir, char *msg, size_t len)
{
	char src[SANDBOX_PATH_MAX + 64], dst[256];

	for (unsigned i = 0; i < a->n_caps_files; i++) {
		const char *rel = a->caps_files[i];
		snprintf(dst, sizeof(dst), "%s/capabilities", dir);
		if (mkdir(dst, 0555) < 0 && errno != EEXIST)
			return failf(msg, len, "mkdir", dst);
		for (const char *slash = strchr(rel, '/'); slash; slash = strchr(slash + 1, '/')) {
			snprintf(dst, sizeof(dst), "%s/capabilities/%.*s", dir, (int)(slash - rel), rel);
			if (mkdir(dst, 0555) < 0 && errno != EEXIST)
				return failf(msg, len, "mkdir", dst);
		}
		snprintf(src, sizeof(src), "%s/%s", a->caps_dir, rel);
		snprintf(dst, sizeof(dst), "%s/capabilities/%s", dir, rel);
		if (access(dst, F_OK) < 0 && copy_small(src, dst, msg, len) < 0)
			return -1;
	}
	return 0;
}

/* /proc/driver/nvidia with ModifyDeviceFiles: 0, so the driver never creates device
 * nodes inside (libnvidia-container nvc_mount.c does the same), and the capability
 * files of the MIG instances the sandbox holds, no other. */
static int fake_nvidia_proc(const struct child_args *a, char *msg, size_t len)
{
	static const char *const files[] = {"params", "version", "registry"};
	const char *dir = NEWROOT "/proc/driver/nvidia";
	char buf[16384], path[256];

	if (access("/proc/driver/nvidia/params", R_OK) < 0)
		return 0; /* no driver on this host (stand-in devices in the tests) */
	if (mount_tmpfs(dir, MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,mode=0555", msg, len) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		ssize_t n;
		int in, out;
		char *p;
		snprintf(path, sizeof(path), "/proc/driver/nvidia/%s", files[i]);
		if ((in = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		n = read(in, buf, sizeof(buf) - 1);
		close(in);
		if (n < 0)
			continue;
		buf[n] = '\0';
		if ((p = strstr(buf, "ModifyDeviceFiles: 1")))
			p[strlen("ModifyDeviceFiles: ")] = '0';
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		if ((out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444)) < 0)
			return failf(msg, len, "create", path);
		if (write(out, buf, (size_t)n) != n) {
			close(out);
			return failf(msg, len, "write", path);
		}
		close(out);
	}
	if (fake_nvidia_caps(a, dir, msg, len) < 0)
		return -1;
	if (mount(NULL, dir, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return failf(msg, len, "remount read-only", dir);
	return 0;
}

static int build_dev(const struct child_args *a, struct mount_fds *f, char *msg, size_t len)
{
	static const char *const links[][2] = {{"/proc/self/fd", "fd"},      {"/proc/self/fd/0", "stdin"},
					       {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"},
					       {"pts/ptmx", "ptmx"}};
	char t[256], opts[64];

	if (mount_tmpfs(NEWROOT "/dev", MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=128,mode=0755", msg, len) < 0)
		return -1;
	for (unsigned i = 0; i < a->n_devs; i++) {
		/* a MIG cap node lies in /dev/nvidia-caps, made with the first of them */
		const char *slash = strchr(a->devs[i].name, '/');
		snprintf(t, sizeof(t), NEWROOT "/dev/%.*s",
			 slash ? (int)(slash - a->devs[i].name) : 0, a->devs[i].name);
		if (slash && mkdir(t, 0755) < 0 && errno != EEXIST)
			return failf(msg, len, "mkdir", t);
		snprintf(t, sizeof(t), NEWROOT "/dev/%s", a->devs[i].name);
		if (touch(t, msg, len) < 0 || attach(&f->devs[i], t) < 0)
			return failf(msg, len, "bind device", t);
	}
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(t, sizeof(t), NEWROOT "/dev/%s", links[i][1]);
		if (symlink(links[i][0], t) < 0)
			return failf(msg, len, "symlink", t);
	}
	if (mkdir(NEWROOT "/dev/pts", 0755) < 0 || mkdir(NEWROOT "/dev/shm", 01777) < 0)
		return failf(msg, len, "mkdir", NEWROOT "/dev/pts|shm");
	/* a private devpts instance: the host's terminals are not reachable */
	if (mount("devpts", NEWROOT "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=0620") < 0)
		return failf(msg, len, "mount devpts on", NEWROOT "/dev/pts");
	/* NCCL and DataLoader workers want a big /dev/shm; it is charged to the memcg */
	snprintf(opts, sizeof(opts), "size=%llu,mode=1777", (unsigned long long)a->shm_bytes);
	if (mount_tmpfs(NEWROOT "/dev/shm", MS_NOSUID | MS_NODEV, opts, msg, len) < 0)
		return -1;
	return 0;
}

/* A fresh /proc for the new pid namespace, its host-wide knobs masked or read-only. */
static int build_proc(char *msg, size_t len)
{
	static const char *const masked[] = {"/proc/kcore",      "/proc/keys",          "/proc/timer_list",
					     "/proc/sched_debug", "/proc/sysrq-trigger", "/proc/latency_stats",
					     "/proc/acpi",       "/proc/scsi",          "/proc/kallsyms",
					     "/proc/asound"};
	static const char *const ro[] = {"/proc/sys", "/proc/bus", "/proc/fs", "/proc/irq"};

	if (mount("proc", NEWROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return failf(msg, len, "mount proc on", NEWROOT "/proc");
	for (size_t i = 0; i < sizeof(masked) / sizeof(masked[0]); i++)
		if (mask(masked[i], msg, len) < 0)
			return -1;
	for (size_t i = 0; i < sizeof(ro) / sizeof(ro[0]); i++)
		if (bind_ro_self(ro[i], msg, len) < 0)
			return -1;
	return 0;
}

/* Read-only sysfs of our own network namespace; cgroupfs and firmware hidden.  The
 * virtual block devices go too: every loop device's loop/backing_file names the image
 * behind it, that is every other user's home image (and /sys/block, /sys/class/block
 * and /sys/dev/block only link into this directory).  Hiding the directory, not each
 * file, also covers loop devices attached after this sandbox started. */
static int build_sys(char *msg, size_t len)
{
	static const char *const masked[] = {"/sys/fs/cgroup", "/sys/firmware", "/sys/kernel/debug",
					     "/sys/kernel/security", "/sys/devices/virtual/powercap",
					     "/sys/kernel/tracing", "/sys/devices/virtual/block"};

	if (mount("sysfs", NEWROOT "/sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 &&
	    mount_tmpfs(NEWROOT "/sys", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555",
			msg, len) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(masked) / sizeof(masked[0]); i++)
		if (mask(masked[i], msg, len) < 0)
			return -1;
	return 0;
}

static int build_tmp(const struct child_args *a, char *msg, size_t len)
{
	char opts[64];

	snprintf(opts, sizeof(opts), "size=%llu,mode=1777", (unsigned long long)a->tmp_bytes);
	return mount_tmpfs(NEWROOT "/tmp", MS_NOSUID | MS_NODEV, opts, msg, len);
}

/* /run: only /run/labd (the Jupyter socket) and the driver libraries (a GPU sandbox's). */
static int build_run(const struct child_args *a, struct mount_fds *f, char *msg, size_t len)
{
	if (mount_tmpfs(NEWROOT "/run", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=64,mode=0755", msg, len) < 0)
		return -1;
	if (mkdir(NEWROOT "/run/labd", 0700) < 0)
		return failf(msg, len, "mkdir", NEWROOT "/run/labd");
	if (f->run >= 0 && attach(&f->run, NEWROOT "/run/labd") < 0)
		return failf(msg, len, "bind run dir on", NEWROOT "/run/labd");
	if (f->driver >= 0) {
		if (mkdir(NEWROOT "/run/nvidia", 0755) < 0 || mkdir(NEWROOT SANDBOX_DRIVER_LIB_INSIDE, 0755) < 0 ||
		    attach(&f->driver, NEWROOT SANDBOX_DRIVER_LIB_INSIDE) < 0)
			return failf(msg, len, "bind driver libs on", NEWROOT SANDBOX_DRIVER_LIB_INSIDE);
	}
	if (a->gpu && fake_nvidia_proc(a, msg, len) < 0)
		return -1;
	return 0;
}

/* /home holds this user's home only: every other home is out of sight. */
static int build_home(const struct child_args *a, struct mount_fds *f, char *msg, size_t len)
{
	char t[SANDBOX_PATH_MAX + 16];

	if (mount_tmpfs(NEWROOT "/home", MS_NOSUID | MS_NODEV, "size=64k,nr_inodes=16,mode=0755", msg, len) < 0)
		return -1;
	snprintf(t, sizeof(t), NEWROOT "%s", a->home_dst);
	if (mkdir(t, 0700) < 0)
		return failf(msg, len, "mkdir", t);
	if (f->home >= 0 && attach(&f->home, t) < 0)
		return failf(msg, len, "bind home on", t);
	return 0;
}

/* Where a link at the image's /etc/resolv.conf points, when that is a file under /run
 * (systemd-resolved's "../run/systemd/resolve/stub-resolv.conf"): /run is our own
 * tmpfs, still writable here, so the file is made there and the resolver bound on it.
 * Any other link is refused: it would be followed on the host's side. */
static int resolv_target(char *out, size_t len, char *msg, size_t mlen)
{
	char link[256];
	const char *rest;
	ssize_t n = readlink(NEWROOT "/etc/resolv.conf", link, sizeof(link) - 1);

	if (n < 0)
		return failf(msg, mlen, "readlink", "/etc/resolv.conf");
	link[n] = '\0';
	rest = !strncmp(link, "/run/", 5) ? link + 5 : !strncmp(link, "../run/", 7) ? link + 7 : NULL;
	if (!rest || !rest[0] || strstr(rest, "..") || strstr(rest, "//")) {
		errno = EINVAL;
		return failf(msg, mlen, "resolv.conf: a link outside /run in the image:", link);
	}
	snprintf(out, len, NEWROOT "/run/%s", rest);
	for (char *p = out + strlen(NEWROOT "/run/"); (p = strchr(p, '/')); p++) {
		*p = '\0';
		int rc = mkdir(out, 0755);
		*p = '/';
		if (rc < 0 && errno != EEXIST)
			return failf(msg, mlen, "mkdir for resolv.conf", out);
	}
	return touch(out, msg, mlen);
}

/* The resolver of an egress sandbox over the image's /etc/resolv.conf (a plain file, or
 * a link into /run: resolv_target). */
static int build_resolv(struct mount_fds *f, char *msg, size_t len)
{
	char t[512] = NEWROOT "/etc/resolv.conf";
	struct stat st;

	if (f->resolv < 0)
		return 0;
	if (lstat(t, &st) < 0)
		return failf(msg, len, "resolv.conf: the image has no", "/etc/resolv.conf");
	if (S_ISLNK(st.st_mode) && resolv_target(t, sizeof(t), msg, len) < 0)
		return -1;
	else if (!S_ISLNK(st.st_mode) && !S_ISREG(st.st_mode)) {
		errno = EINVAL;
		return failf(msg, len, "resolv.conf: not a plain file in the image:", "/etc/resolv.conf");
	}
	if (attach(&f->resolv, t) < 0)
		return failf(msg, len, "bind resolv.conf on", t);
	return 0;
}

/* One generated file over the image's file at name (a plain file; an image without
 * one has nothing to shadow): made in our /run tmpfs (read-only once sealed) and bound
 * read-only.  It stays linked there: an unlinked file still in use would make the
 * remount read-only fail (EBUSY). */
static int shadow_file(const char *name, const char *text, char *msg, size_t len)
{
	char src[64], dst[64];
	struct stat st;
	size_t n = strlen(text);
	int fd;

	snprintf(dst, sizeof(dst), NEWROOT "/etc/%s", name);
	snprintf(src, sizeof(src), NEWROOT ACCOUNTS_DIR "/%s", name);
	if (lstat(dst, &st) < 0)
		return errno == ENOENT ? 0 : failf(msg, len, "stat", dst);
	if (!S_ISREG(st.st_mode)) {
		errno = EINVAL;
		return failf(msg, len, "accounts: not a plain file in the image:", dst + strlen(NEWROOT));
	}
	if ((fd = open(src, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644)) < 0)
		return failf(msg, len, "create", src);
	if (write(fd, text, n) != (ssize_t)n) {
		close(fd);
		return failf(msg, len, "write", src);
	}
	close(fd);
	if ((fd = clone_tree(src, false)) < 0 ||
	    set_attr(fd, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
		     false) < 0 ||
	    attach(&fd, dst) < 0)
		return failf(msg, len, "bind accounts on", dst);
	return 0;
}

/* The sandbox's own /etc/passwd and /etc/group (accounts.h): whoami answers the lab
 * user's name, and no host account shows. */
static int build_accounts(const struct child_args *a, char *msg, size_t len)
{
	static char passwd[ACCOUNTS_TEXT_MAX], group[ACCOUNTS_TEXT_MAX];

	if (accounts_text(a->user, a->inner_uid, a->home_dst, passwd, sizeof(passwd), group,
			  sizeof(group)) < 0) {
		errno = EINVAL;
		return failf(msg, len, "accounts: bad user name or home", a->user ? a->user : "");
	}
	if (mkdir(NEWROOT ACCOUNTS_DIR, 0755) < 0)
		return failf(msg, len, "mkdir", NEWROOT ACCOUNTS_DIR);
	if (shadow_file("passwd", passwd, msg, len) < 0 || shadow_file("group", group, msg, len) < 0)
		return -1;
	return 0;
}

/* The sandbox's own /etc/hosts, as container runtimes write it: loopback and its
 * hostname (the user's name, step hostname) on 127.0.1.1. Code that looks its own host
 * up (torchrun's rendezvous and gloo, MPI) finds it; the host's file would not name it.
 * An image whose /etc/hosts is no plain file keeps its own (names resolve as before). */
static int build_hosts(const struct child_args *a, char *msg, size_t len)
{
	char text[256];
	struct stat st;

	if (lstat(NEWROOT "/etc/hosts", &st) < 0 || !S_ISREG(st.st_mode) || !a->user)
		return 0;
	snprintf(text, sizeof(text),
		 "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
		 "127.0.1.1\t%s\n", a->user);
	return shadow_file("hosts", text, msg, len);
}

/* The scaffolding tmpfs become read-only once populated, then the new root replaces
 * the old: pivot_root(".", ".") stacks the old root on top; detaching it leaves ours. */
static int seal_and_pivot(char *msg, size_t len)
{
	if (mount(NULL, NEWROOT "/dev", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, NULL) < 0 ||
	    mount(NULL, NEWROOT "/run", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0 ||
	    mount(NULL, NEWROOT "/home", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
		return failf(msg, len, "remount read-only", "/dev|/run|/home");
	if (chdir(NEWROOT) < 0 || syscall(SYS_pivot_root, ".", ".") < 0)
		return failf(msg, len, "pivot_root", NEWROOT);
	if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		return failf(msg, len, "detach old root", "/");
	return 0;
}

/* Whether path lies strictly below dir. */
static bool below(const char *dir, const char *path)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && path[n] == '/';
}

static bool has_bind_below(const struct child_args *a, const char *dir)
{
	for (unsigned i = 0; i < a->n_binds; i++)
		if (below(dir, a->binds[i].dst))
			return true;
	return false;
}

/* Writable scaffolds made while the binds are placed (a masked place's, apply_masks; a
 * layer, make_layer), sealed read-only once every bind is in: at most one per bind. */
struct scaffolds {
	char path[CHILD_MAX_BINDS + SANDBOX_MAX_MASKS + SANDBOX_MAX_HIDDEN + 8][SANDBOX_PATH_MAX + 8];
	unsigned n;
};

/* The masks of the spec.  A masked directory with a bind below it gets a
 * writable scaffold tmpfs instead (only the bind's chain of directories will be in
 * it), listed in sc so it is made read-only once the binds are in place. */
static int apply_masks(const struct child_args *a, struct scaffolds *sc, char *msg, size_t len)
{
	char t[SANDBOX_PATH_MAX + 8];
	struct stat st;

	for (unsigned i = 0; i < a->n_masks; i++) {
		snprintf(t, sizeof(t), NEWROOT "%s", a->masks[i]);
		if (!has_bind_below(a, a->masks[i]) || lstat(t, &st) < 0 || !S_ISDIR(st.st_mode)) {
			if (mask(a->masks[i], msg, len) < 0)
				return -1;
			continue;
		}
		if (mount_tmpfs(t, MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755", msg,
				len) < 0)
			return -1;
		snprintf(sc->path[sc->n++], sizeof(sc->path[0]), "%s", t);
	}
	return 0;
}

/* One entry of a layered directory (under is the image's directory beneath the layer):
 * a link is made again with its own text; anything else gets an empty placeholder with
 * the entry's own mount tree (AT_RECURSIVE: a mask or bind below it stays) bound on it.
 * The clone keeps the image's read-only, nosuid, nodev flags. */
static int layer_entry(int under, const char *dir, const char *name, char *msg, size_t len)
{
	char t[SANDBOX_PATH_MAX + 8 + 258], link[SANDBOX_PATH_MAX]; /* dir, "/", a d_name */
	struct stat st;
	ssize_t n;
	int fd;

	snprintf(t, sizeof(t), "%s/%s", dir, name);
	if (fstatat(under, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return failf(msg, len, "layer: stat", t);
	if (S_ISLNK(st.st_mode)) {
		if ((n = readlinkat(under, name, link, sizeof(link) - 1)) < 0)
			return failf(msg, len, "layer: readlink", t);
		link[n] = '\0';
		return symlink(link, t) < 0 ? failf(msg, len, "layer: symlink", t) : 0;
	}
	if (S_ISDIR(st.st_mode) ? mkdir(t, 0755) < 0 : touch(t, msg, len) < 0)
		return failf(msg, len, "layer: placeholder", t);
	fd = open_tree(under, name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW);
	if (fd < 0 || attach(&fd, t) < 0)
		return failf(msg, len, "layer: bind", t);
	return 0;
}

/* dir, a directory of the read-only image, lacks a bind's mount point: a small tmpfs
 * (the directory's mode) goes over it and every entry the image has there comes back
 * as itself (layer_entry), so the sandbox makes its own mount points whatever the host
 * has (the host's /opt shown, labd's /opt/labd/libexec and /opt/ml not in it).  The
 * scaffold is sealed read-only with the others. */
static int make_layer(const char *dir, struct scaffolds *sc, char *msg, size_t len)
{
	char opts[96];
	struct dirent *e;
	struct stat st;
	int under, rc = 0;
	DIR *d;

	if (sc->n >= sizeof(sc->path) / sizeof(sc->path[0])) {
		errno = ENOSPC;
		return failf(msg, len, "layer: too many scaffolds at", dir);
	}
	under = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (under < 0 || fstat(under, &st) < 0) {
		rc = failf(msg, len, "layer: open", dir);
		goto out;
	}
	/* room for long links (a page each) and a few thousand entries; held only when used */
	snprintf(opts, sizeof(opts), "size=1m,nr_inodes=4096,mode=%o", (unsigned)(st.st_mode & 07777));
	if (mount_tmpfs(dir, MS_NOSUID | MS_NODEV | MS_NOEXEC, opts, msg, len) < 0) {
		rc = -1;
		goto out;
	}
	snprintf(sc->path[sc->n++], sizeof(sc->path[0]), "%s", dir);
	/* the fd still names the image's directory, now beneath the tmpfs */
	if (!(d = fdopendir(under))) {
		rc = failf(msg, len, "layer: list", dir);
		goto out;
	}
	under = -1;
	while (rc == 0 && (errno = 0, e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			rc = layer_entry(dirfd(d), dir, e->d_name, msg, len);
	if (rc == 0 && errno)
		rc = failf(msg, len, "layer: list", dir);
	closedir(d);
out:
	if (under >= 0)
		close(under);
	return rc;
}

/* mkdir -p of target's parents and target itself inside the new root: directories the
 * image has answer EEXIST (a link on the way is refused: it would be followed on the
 * host's side), new ones land in a scaffold, or in a layer made over the image's
 * read-only directory where they are missing (make_layer). */
static int make_chain(const char *target, struct scaffolds *sc, char *msg, size_t len)
{
	char t[SANDBOX_PATH_MAX + 8];
	struct stat st;

	snprintf(t, sizeof(t), "%s", target);
	for (char *p = t + strlen(NEWROOT) + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p, *slash;
		*p = '\0';
		int rc = mkdir(t, 0755);
		if (rc < 0 && errno == EROFS) {
			/* the parent is the image's (NEWROOT itself at the top): layer it, and
			 * the mkdir lands in the layer */
			slash = strrchr(t, '/');
			*slash = '\0';
			rc = make_layer(t, sc, msg, len);
			*slash = '/';
			if (rc < 0)
				return -1;
			if (mkdir(t, 0755) < 0)
				return failf(msg, len, "mkdir", t);
		} else if (rc < 0 && errno == EEXIST) {
			if (lstat(t, &st) < 0 || !S_ISDIR(st.st_mode)) {
				errno = ENOTDIR;
				return failf(msg, len, "bind: not a directory in the image on the way:", t);
			}
		} else if (rc < 0) {
			return failf(msg, len, "mkdir", t);
		}
		*p = c;
		if (c == '\0')
			return 0;
	}
}

/* The binds at their inside paths, then the scaffolds under them sealed. */
static int build_ro_binds(const struct child_args *a, struct mount_fds *f, char *msg, size_t len)
{
	static struct scaffolds sc;
	char t[SANDBOX_PATH_MAX + 8];

	sc.n = 0;
	if (apply_masks(a, &sc, msg, len) < 0)
		return -1;
	for (unsigned i = 0; i < a->n_binds; i++) {
		snprintf(t, sizeof(t), NEWROOT "%s", a->binds[i].dst);
		if (make_chain(t, &sc, msg, len) < 0)
			return -1;
		if (attach(&f->binds[i], t) < 0)
			return failf(msg, len, "bind on", t);
	}
	for (unsigned i = 0; i < sc.n; i++)
		if (mount(NULL, sc.path[i], NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			  NULL) < 0)
			return failf(msg, len, "remount read-only", sc.path[i]);
	return 0;
}

int mounts_build(const struct child_args *a, struct mount_fds *f, char *msg, size_t len)
{
	mask_dir_src[0] = mask_file_src[0] = '\0';
	if (attach(&f->root, NEWROOT) < 0)
		return failf(msg, len, "attach root on", NEWROOT);
	if (build_proc(msg, len) < 0 || build_sys(msg, len) < 0 || build_dev(a, f, msg, len) < 0 ||
	    build_tmp(a, msg, len) < 0 || build_run(a, f, msg, len) < 0 || build_home(a, f, msg, len) < 0 ||
	    build_resolv(f, msg, len) < 0 || build_accounts(a, msg, len) < 0 ||
	    build_hosts(a, msg, len) < 0)
		return -1;
	if (build_ro_binds(a, f, msg, len) < 0)
		return -1;
	return seal_and_pivot(msg, len);
}
