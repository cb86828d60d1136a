/* home.c - per-user ext4 home images; see home.h.
 *
 * Host-side code here never opens anything inside a user's home: the image is made
 * with mkfs.ext4 -E root_owner, so no chown walks user paths, and the helpers
 * (mkfs.ext4, resize2fs, e2fsck) run by absolute path with a clean environment and no
 * inherited fds, so LD_PRELOAD or a planted PATH of a user never reaches them.
 */
#include "sandbox/home.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "labd/log.h"
#include "sandbox/fail.h"
#include "sandbox/homeloop.h"
#include "sandbox/homeguard.h"

#define PATH_LEN 4096

static int run_helper(const char *const argv[])
{
	static char *const clean_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
	int st;
	pid_t pid = fork();

	if (pid < 0)
		return fail_errno("fork %s", argv[0]);
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (devnull >= 0) {
			dup2(devnull, STDIN_FILENO);
			dup2(devnull, STDOUT_FILENO);
		}
		syscall(SYS_close_range, 3, ~0U, 0);
		execve(argv[0], (char *const *)argv, clean_env);
		log_die("exec %s", argv[0]);
	}
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR)
			return fail_errno("waitpid %s", argv[0]);
	}
	if (!WIFEXITED(st))
		return fail_error("%s: killed by signal %d", argv[0], WTERMSIG(st));
	return WEXITSTATUS(st);
}

static const char *tool(const char *name)
{
	static char buf[64];
	static const char *const dirs[] = {"/usr/sbin", "/sbin", "/usr/bin"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(buf, sizeof(buf), "%s/%s", dirs[i], name);
		if (access(buf, X_OK) == 0)
			return buf;
	}
	snprintf(buf, sizeof(buf), "/usr/sbin/%s", name);
	return buf;
}

/* An existing image is kept as it is: 1 if image is a regular file, 0 if
 * there is none, -1 (failed) if something else has its name. */
static int home_exists(const char *image)
{
	struct stat st;

	if (lstat(image, &st) < 0)
		return errno == ENOENT ? 0 : fail_errno("home %s", image);
	return S_ISREG(st.st_mode) ? 1 : fail_error("home %s: not a regular file", image);
}

/* mkfs.ext4 on the sparse file at path, size_bytes long; 0 or -1 (failed). */
static int home_make_fs(const char *path, uint64_t size_bytes, uid_t owner)
{
	char opts[128], mkfs_path[64];
	int fd, rc;

	unlink(path); /* a crashed maker's leftover under this pid */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return fail_errno("create %s", path);
	/* sparse: blocks are only used as the user writes */
	rc = ftruncate(fd, (off_t)size_bytes);
	close(fd);
	if (rc < 0)
		return fail_errno("truncate %s", path);
	/* -m 0: no root-reserved blocks (the mapped root could otherwise use them);
	 * root_owner: the home's root dir belongs to the user's mapped host uid */
	snprintf(opts, sizeof(opts), "root_owner=%u:%u,lazy_itable_init=1,nodiscard", (unsigned)owner,
		 (unsigned)owner);
	snprintf(mkfs_path, sizeof(mkfs_path), "%s", tool("mkfs.ext4"));
	/* -b 4096: also below 512 MiB, where mkfs.ext4 would pick 1 KiB blocks; the loop
	 * device takes the same block size (homeloop.c) */
	const char *argv[] = {mkfs_path, "-q", "-F", "-b", "4096", "-m", "0", "-E", opts, "-L", "labd-home", path, NULL};
	rc = run_helper(argv);
	return rc == 0 ? 0 : fail_error("mkfs.ext4 %s failed (%d)", path, rc);
}

int home_ensure(const char *image, uint64_t size_bytes, uid_t owner)
{
	char dir[PATH_LEN], tmp[PATH_LEN + 32];
	const char *slash = strrchr(image, '/');
	int rc;

	if (!slash || size_bytes < (16ull << 20))
		return fail_error("home %s: bad path or size", image);
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - image), image);
	if (dir[0] && mkdir(dir, 0700) < 0 && errno != EEXIST)
		return fail_errno("mkdir %s", dir);
	rc = home_exists(image);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	/* Made under a name of this process's own and renamed into place when
	 * whole: a user's first sandboxes can start at once (several jobs), and
	 * one must never mount the image another is still formatting. */
	snprintf(tmp, sizeof(tmp), "%s.new-%ld", image, (long)getpid());
	if (home_make_fs(tmp, size_bytes, owner) < 0) {
		unlink(tmp);
		return -1;
	}
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, image, RENAME_NOREPLACE) == 0)
		return 0;
	rc = errno;
	unlink(tmp);
	if (rc != EEXIST) {
		errno = rc;
		return fail_errno("rename %s", tmp);
	}
	return home_exists(image) == 1 ? 0 : -1; /* another start made it first */
}

void home_key(uint32_t user_id, char *buf, size_t size)
{
	snprintf(buf, size, "%" PRIu32, user_id);
}

int home_mount_path(const char *state_dir, const char *key, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/homes/%s/mnt", state_dir, key);
	return (n < 0 || (size_t)n >= size) ? -1 : 0;
}

/* Creates <state>/homes/<key>/{mnt,refs} and returns the locked lock fd, or -1. */
static int home_lock(const char *state_dir, const char *key)
{
	char path[PATH_LEN];
	const char *const sub[] = {"", "/homes", "/homes/", "/homes/", "/homes/"};
	const char *const tail[] = {"", "", "", "/mnt", "/refs"};
	int fd;

	if (!key[0] || strchr(key, '/') || key[0] == '.')
		return fail_error("bad home key %s", key);
	for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
		snprintf(path, sizeof(path), "%s%s%s%s", state_dir, sub[i], i >= 2 ? key : "", tail[i]);
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			return fail_errno("mkdir %s", path);
	}
	snprintf(path, sizeof(path), "%s/homes/%s/lock", state_dir, key);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return fail_errno("open %s", path);
	if (flock(fd, LOCK_EX) < 0) {
		close(fd);
		return fail_errno("lock %s", path);
	}
	return fd;
}

static bool is_mounted(const char *mnt, dev_t *dev)
{
	char parent[PATH_LEN];
	struct stat a, b;

	snprintf(parent, sizeof(parent), "%s/..", mnt);
	if (stat(mnt, &a) < 0 || stat(parent, &b) < 0)
		return false;
	if (dev)
		*dev = a.st_dev;
	return a.st_dev != b.st_dev;
}

static int count_refs(const char *state_dir, const char *key)
{
	char path[PATH_LEN];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/homes/%s/refs", state_dir, key);
	if (!(d = opendir(path)))
		return errno == ENOENT ? 0 : -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* The loop device the image is attached to already ("/dev/loopN" into dev),
 * found through sysfs; 0 when found, -1 when not attached. */
static int attached_loop(const char *image, char *dev, size_t len)
{
	char want[PATH_MAX], path[PATH_LEN], backing[PATH_MAX];
	struct dirent *e;
	DIR *d;
	int rc = -1;

	if (!realpath(image, want) || !(d = opendir("/sys/block")))
		return -1;
	while (rc < 0 && (e = readdir(d))) {
		if (strncmp(e->d_name, "loop", 4) != 0)
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", e->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(backing, sizeof(backing), f)) {
			backing[strcspn(backing, "\n")] = '\0';
			if (strcmp(backing, want) == 0) {
				snprintf(dev, len, "/dev/%.32s", e->d_name);
				rc = 0;
			}
		}
		fclose(f);
	}
	closedir(d);
	return rc;
}

/* How long a home whose loop device is being detached is waited for: 2 s. */
#define HOME_DETACH_WAITS 40
#define HOME_DETACH_WAIT_US 50000

static int loop_mount(const char *image, const char *mnt)
{
	struct loop_config cfg;
	char dev[64];
	int ctl, loopfd = -1, imgfd, rc = -1;

	/* Still attached: a sandbox started while this home was mounted holds a
	 * copy of the mount in its namespace (one of the release before, whose
	 * homes were not under an unbindable bind, or one whose detach of the
	 * old root has not finished yet: home_seal_dir). Mount that
	 * same device, which shares its superblock; a second loop device on the
	 * same image would be a second ext4 instance on one file: corruption. */
	for (int wait = 0; attached_loop(image, dev, sizeof(dev)) == 0; wait++) {
		if (homeguard_reuse(image, mnt, dev) < 0)
			return -1;
		log_warn("home %s is still attached to %s: reusing it", image, dev);
		if (mount(dev, mnt, "ext4", MS_NODEV | MS_NOSUID, "errors=remount-ro") == 0)
			return 0;
		/* The copy that held it may be going away right now (its namespace
		 * ended: the kernel detaches the device on its own, a moment later),
		 * and a device being detached answers EIO/ENXIO. Wait for the detach,
		 * then attach afresh below. */
		if ((errno != EIO && errno != ENXIO) || wait >= HOME_DETACH_WAITS)
			return fail_errno("mount %s on %s", dev, mnt);
		usleep(HOME_DETACH_WAIT_US);
	}
	imgfd = open(image, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (imgfd < 0)
		return fail_errno("open %s", image);
	/* on the fd the loop device keeps: held while it is attached (homeguard.h) */
	if (homeguard_lock(imgfd, image) < 0) {
		close(imgfd);
		return -1;
	}
	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0) {
		fail_errno("open /dev/loop-control");
		goto out;
	}
	for (int tries = 0; tries < 16; tries++) {
		int nr = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (nr < 0) {
			fail_errno("loop: get free device");
			goto out;
		}
		snprintf(dev, sizeof(dev), "/dev/loop%d", nr);
		loopfd = open(dev, O_RDWR | O_CLOEXEC);
		if (loopfd < 0) {
			fail_errno("open %s", dev);
			goto out;
		}
		home_loop_config(imgfd, image, &cfg);
		if (ioctl(loopfd, LOOP_CONFIGURE, &cfg) == 0)
			break;
		/* a kernel that refuses the block size or direct I/O */
		if (errno == EINVAL && home_loop_config_plain(&cfg) == 0 &&
		    ioctl(loopfd, LOOP_CONFIGURE, &cfg) == 0)
			break;
		close(loopfd);
		loopfd = -1;
		if (errno != EBUSY) {
			fail_errno("loop: configure %s", dev);
			goto out;
		}
	}
	if (loopfd < 0) {
		fail_error("loop: no free device");
		goto out;
	}
	home_loop_report(dev, image);
	if (mount(dev, mnt, "ext4", MS_NODEV | MS_NOSUID, "errors=remount-ro") < 0) {
		fail_errno("mount %s on %s", dev, mnt);
		goto out;
	}
	homeguard_note(mnt, dev);
	rc = 0;
out:
	if (loopfd >= 0)
		close(loopfd);
	if (ctl >= 0)
		close(ctl);
	close(imgfd);
	return rc;
}

static int unmount_home(const char *mnt)
{
	if (umount2(mnt, UMOUNT_NOFOLLOW) == 0 || errno == EINVAL)
		return 0;
	/* EBUSY: a dying sandbox still pins it; detach now, the kernel finishes later */
	if (umount2(mnt, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
		return 0;
	return fail_errno("umount %s", mnt);
}

/* <state>/homes/<key>: the directory that holds the mount point. */
static void home_dir_path(const char *state_dir, const char *key, char *buf, size_t size)
{
	snprintf(buf, size, "%s/homes/%s", state_dir, key);
}

/* 1 when dir is the root of a mount, 0 when not, -1 on error. */
static int mount_root(const char *dir)
{
	struct statx sx;

	if (statx(AT_FDCWD, dir, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx) < 0)
		return -1;
	if (!(sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return errno = EOPNOTSUPP, -1;
	return (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
}

/* The home's directory becomes a bind mount of itself, unbindable, before the
 * home is mounted inside it. Every sandbox's root is a recursive clone of the
 * host's "/", and a recursive clone skips an unbindable mount with all below
 * it: no other user's sandbox takes a copy of this home along, and the loop
 * device detaches at the home's own last unmount. The home's mount itself
 * stays bindable, for its user's sandboxes (a clone of that one mount). The
 * lock and refs files are the same inodes through the bind. A bind already
 * there (a crash, a sandbox adopted) is reused. */
int home_seal_dir(const char *dir)
{
	int root = mount_root(dir);

	if (root < 0)
		return fail_errno("statx %s", dir);
	if (!root && mount(dir, dir, NULL, MS_BIND, NULL) < 0)
		return fail_errno("bind %s on itself", dir);
	if (mount(NULL, dir, NULL, MS_UNBINDABLE, NULL) == 0)
		return 0;
	fail_errno("make %s unbindable", dir);
	if (!root)
		umount2(dir, MNT_DETACH | UMOUNT_NOFOLLOW);
	return -1;
}

/* The home's mount, then its directory's bind (when there is one: a home
 * mounted by the release before has none). */
static int release_home(const char *state_dir, const char *key)
{
	char dir[PATH_LEN], mnt[PATH_LEN];
	int rc = 0;

	home_dir_path(state_dir, key, dir, sizeof(dir));
	home_mount_path(state_dir, key, mnt, sizeof(mnt));
	if (is_mounted(mnt, NULL))
		rc = unmount_home(mnt);
	if (rc == 0 && mount_root(dir) == 1)
		rc = unmount_home(dir);
	return rc;
}

/* The loop device's backing file (its path now, as the kernel names it; a
 * file deleted since ends in " (deleted)") into out; 0, or -1 when dev is not
 * a loop device. */
static int loop_backing(dev_t dev, char *out, size_t len)
{
	char path[96];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/loop/backing_file", major(dev),
		 minor(dev));
	if (!(f = fopen(path, "re")))
		return -1;
	if (!fgets(out, (int)len, f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	out[strcspn(out, "\n")] = '\0';
	return 0;
}

/* Whether what is mounted at mnt is image's loop device. */
static bool mount_holds(const char *mnt, const char *image)
{
	char want[PATH_MAX], backing[PATH_MAX];
	dev_t dev;

	return is_mounted(mnt, &dev) && realpath(image, want) &&
	       loop_backing(dev, backing, sizeof(backing)) == 0 && strcmp(backing, want) == 0;
}

int home_mount_ref(const char *state_dir, const char *key, const char *image, const char *holder)
{
	char mnt[PATH_LEN], ref[PATH_LEN], dir[PATH_LEN];
	int lock, fd, rc = -1;

	if (!holder[0] || strchr(holder, '/') || holder[0] == '.')
		return fail_error("bad home holder %s", holder);
	if ((lock = home_lock(state_dir, key)) < 0)
		return -1;
	home_mount_path(state_dir, key, mnt, sizeof(mnt));
	/* a mount point that holds another image (a deleted user's, archived
	 * since) is never handed out: refused while a sandbox holds it, else
	 * unmounted and the right image mounted */
	if (is_mounted(mnt, NULL) && !mount_holds(mnt, image)) {
		if (count_refs(state_dir, key) != 0) {
			fail_error("home %s: %s holds another image, still in use: refused", image,
				   mnt);
			goto out;
		}
		log_warn("home %s: %s held another image, unused: unmounted", image, mnt);
		if (unmount_home(mnt) < 0)
			goto out;
	}
	if (!is_mounted(mnt, NULL)) {
		home_dir_path(state_dir, key, dir, sizeof(dir));
		if (home_seal_dir(dir) < 0)
			goto out;
		if (loop_mount(image, mnt) < 0) {
			if (count_refs(state_dir, key) == 0)
				release_home(state_dir, key);
			goto out;
		}
	}
	snprintf(ref, sizeof(ref), "%s/homes/%s/refs/%s", state_dir, key, holder);
	fd = open(ref, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		fail_errno("create %s", ref);
		if (count_refs(state_dir, key) == 0)
			release_home(state_dir, key);
		goto out;
	}
	close(fd);
	rc = 0;
out:
	close(lock);
	return rc;
}

int home_unref(const char *state_dir, const char *key, const char *holder)
{
	char ref[PATH_LEN];
	int lock, rc = 0;

	if (!holder[0] || strchr(holder, '/') || holder[0] == '.')
		return fail_error("bad home holder %s", holder);
	if ((lock = home_lock(state_dir, key)) < 0)
		return -1;
	snprintf(ref, sizeof(ref), "%s/homes/%s/refs/%s", state_dir, key, holder);
	if (unlink(ref) < 0 && errno != ENOENT)
		rc = fail_errno("unlink %s", ref);
	if (count_refs(state_dir, key) == 0 && release_home(state_dir, key) < 0)
		rc = -1;
	close(lock);
	return rc;
}

int home_gc(const char *state_dir, bool (*is_live)(const char *holder, void *arg), void *arg)
{
	char path[PATH_LEN];
	struct dirent *u, *r;
	int dropped = 0;
	DIR *homes, *refs;

	snprintf(path, sizeof(path), "%s/homes", state_dir);
	if (!(homes = opendir(path)))
		return errno == ENOENT ? 0 : fail_errno("opendir %s", path);
	while ((u = readdir(homes))) {
		int lock;
		if (u->d_name[0] == '.' || u->d_type != DT_DIR)
			continue;
		if ((lock = home_lock(state_dir, u->d_name)) < 0)
			continue;
		snprintf(path, sizeof(path), "%s/homes/%s/refs", state_dir, u->d_name);
		if ((refs = opendir(path))) {
			while ((r = readdir(refs))) {
				if (r->d_name[0] == '.' || is_live(r->d_name, arg))
					continue;
				if (unlinkat(dirfd(refs), r->d_name, 0) == 0)
					dropped++;
			}
			closedir(refs);
		}
		if (count_refs(state_dir, u->d_name) == 0)
			release_home(state_dir, u->d_name);
		close(lock);
	}
	closedir(homes);
	return dropped;
}

/* Finds /dev/loopN backing the mount whose st_dev is dev. */
static int loop_dev_of(dev_t dev, char *buf, size_t size)
{
	if (major(dev) != 7)
		return fail_error("home is not on a loop device");
	snprintf(buf, size, "/dev/loop%u", minor(dev));
	return 0;
}

/* Whether the unmounted image's file system spans the whole file (its
 * superblock's size, within one block). */
static bool fs_fills(const char *image, const struct stat *st)
{
	struct home_usage u;
	char none[1] = "";

	if (home_usage(none, none, image, &u) < 0)
		return true; /* unreadable: leave it to fsck at mount */
	return u.size_bytes + 4096 * 2 >= (uint64_t)st->st_size;
}

int home_grow(const char *state_dir, const char *key, const char *image, uint64_t new_size_bytes)
{
	char mnt[PATH_LEN], dev[64], resize[64], e2fsck[64];
	struct stat st;
	dev_t mdev;
	int fd, lock, rc = -1;

	if ((lock = home_lock(state_dir, key)) < 0)
		return -1;
	fd = open(image, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		fail_errno("open %s", image);
		goto out;
	}
	if (new_size_bytes < (uint64_t)st.st_size) {
		fail_error("home %s: shrinking is not supported", image);
		goto out;
	}
	home_mount_path(state_dir, key, mnt, sizeof(mnt));
	/* not mounted here: only while no one else has it mounted (homeguard.h) */
	if (!is_mounted(mnt, NULL) && homeguard_lock(fd, image) < 0)
		goto out;
	/* the same size: done, unless the file grew and its file system did not
	 * (online growth refused): then the offline resize below catches up */
	if (new_size_bytes == (uint64_t)st.st_size && (is_mounted(mnt, NULL) || fs_fills(image, &st))) {
		rc = 0;
		goto out;
	}
	if (ftruncate(fd, (off_t)new_size_bytes) < 0) {
		fail_errno("truncate %s", image);
		goto out;
	}
	snprintf(resize, sizeof(resize), "%s", tool("resize2fs"));
	snprintf(e2fsck, sizeof(e2fsck), "%s", tool("e2fsck"));
	if (is_mounted(mnt, &mdev)) {
		int lfd;
		if (loop_dev_of(mdev, dev, sizeof(dev)) < 0)
			goto out;
		lfd = open(dev, O_RDONLY | O_CLOEXEC);
		/* the loop device picks up the new size of its file, then ext4 grows online */
		if (lfd < 0 || ioctl(lfd, LOOP_SET_CAPACITY, 0) < 0) {
			fail_errno("loop: set capacity of %s", dev);
			if (lfd >= 0)
				close(lfd);
			goto out;
		}
		close(lfd);
		const char *argv[] = {resize, dev, NULL};
		if (run_helper(argv) != 0) {
			fail_error("resize2fs %s failed", dev);
			goto out;
		}
	} else if (home_attached(image)) {
		/* live under another mount point (a copy in a sandbox's namespace, or
		 * a key that is not this one): an offline resize would corrupt it */
		fail_error("home %s: attached but not mounted at %s: not resized", image, mnt);
		goto out;
	} else {
		const char *fsck[] = {e2fsck, "-f", "-p", image, NULL};
		const char *argv[] = {resize, image, NULL};
		int frc = run_helper(fsck);
		if (frc < 0 || frc > 1) { /* 1: errors corrected */
			fail_error("e2fsck %s failed (%d)", image, frc);
			goto out;
		}
		if (run_helper(argv) != 0) {
			fail_error("resize2fs %s failed", image);
			goto out;
		}
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	close(lock);
	return rc;
}

/* ext4 superblock fields (at byte 1024 of the image), little-endian */
static uint32_t le32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

int home_usage(const char *state_dir, const char *key, const char *image, struct home_usage *u)
{
	char mnt[PATH_LEN];
	struct statfs sfs;
	struct stat st;

	memset(u, 0, sizeof(*u));
	if (lstat(image, &st) < 0 || !S_ISREG(st.st_mode))
		return fail_errno("home %s", image);
	u->image_bytes = (uint64_t)st.st_blocks * 512;
	home_mount_path(state_dir, key, mnt, sizeof(mnt));
	if (is_mounted(mnt, NULL) && statfs(mnt, &sfs) == 0) {
		u->size_bytes = (uint64_t)sfs.f_blocks * (uint64_t)sfs.f_bsize;
		u->avail_bytes = (uint64_t)sfs.f_bavail * (uint64_t)sfs.f_bsize;
		u->used_bytes = ((uint64_t)sfs.f_blocks - (uint64_t)sfs.f_bfree) * (uint64_t)sfs.f_bsize;
		u->inodes = sfs.f_files;
		u->inodes_free = sfs.f_ffree;
		return 0;
	}
	/* not mounted: the superblock's counters are exact after a clean unmount */
	{
		unsigned char sb[1024];
		int fd = open(image, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		uint64_t blocks, freeb, bs;
		if (fd < 0)
			return fail_errno("open %s", image);
		if (pread(fd, sb, sizeof(sb), 1024) != (ssize_t)sizeof(sb)) {
			close(fd);
			return fail_error("home %s: short superblock", image);
		}
		close(fd);
		if (sb[0x38] != 0x53 || sb[0x39] != 0xEF)
			return fail_error("home %s: not ext4", image);
		bs = 1024ull << le32(sb + 0x18);
		blocks = le32(sb + 0x4);
		freeb = le32(sb + 0xC);
		if (le32(sb + 0x60) & 0x80) { /* INCOMPAT_64BIT */
			blocks |= (uint64_t)le32(sb + 0x150) << 32;
			freeb |= (uint64_t)le32(sb + 0x158) << 32;
		}
		u->size_bytes = blocks * bs;
		u->used_bytes = (blocks - freeb) * bs;
		u->avail_bytes = freeb * bs;
		u->inodes = le32(sb + 0x0);
		u->inodes_free = le32(sb + 0x10);
	}
	return 0;
}

int home_fsck(const char *image)
{
	char e2fsck[64];
	snprintf(e2fsck, sizeof(e2fsck), "%s", tool("e2fsck"));
	const char *argv[] = {e2fsck, "-f", "-n", image, NULL};
	return run_helper(argv) == 0 ? 0 : -1;
}

void home_key_find(const char *state_dir, uint32_t user_id, const char *user,
		   const char *image, char *key, size_t size)
{
	char mnt[PATH_LEN];

	home_key(user_id, key, size);
	if (home_mounted(state_dir, key) || !user || !user[0] || strchr(user, '/') ||
	    user[0] == '.')
		return;
	/* a sandbox of the release before keeps the home mounted by name: that
	 * mount only when it is this very image (never a deleted namesake's) */
	if (home_mount_path(state_dir, user, mnt, sizeof(mnt)) == 0 && mount_holds(mnt, image))
		snprintf(key, size, "%s", user);
}

int sandbox_home_usage(const char *state_dir, uint32_t user_id, const char *user,
		       const char *image, uint64_t *used_bytes, bool *mounted)
{
	char mnt[PATH_LEN], key[HOME_KEY_MAX];
	struct home_usage u;

	home_key_find(state_dir, user_id, user, image, key, sizeof(key));
	if (home_usage(state_dir, key, image, &u) < 0)
		return -1;
	home_mount_path(state_dir, key, mnt, sizeof(mnt));
	*used_bytes = u.used_bytes;
	*mounted = is_mounted(mnt, NULL);
	/* ext4 writes its counters to the superblock at unmount */
	return !*mounted && home_attached(image) ? -EBUSY : 0;
}

int sandbox_home_grow(const char *state_dir, uint32_t user_id, const char *user,
		      const char *image, uint64_t size_bytes)
{
	char key[HOME_KEY_MAX];

	home_key_find(state_dir, user_id, user, image, key, sizeof(key));
	return home_grow(state_dir, key, image, size_bytes);
}

bool home_mounted(const char *state_dir, const char *key)
{
	char mnt[PATH_LEN];

	return home_mount_path(state_dir, key, mnt, sizeof(mnt)) == 0 && is_mounted(mnt, NULL);
}

bool home_attached(const char *image)
{
	char dev[64];

	return attached_loop(image, dev, sizeof(dev)) == 0;
}

int home_run_helper(const char *const argv[])
{
	return run_helper(argv);
}

const char *home_tool(const char *name)
{
	return tool(name);
}
