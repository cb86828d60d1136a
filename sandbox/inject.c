/* inject.c - mounts added to and removed from a running sandbox (docs/sandbox.md,
 * "Injection"): a job's input channels, model, output and checkpoint folders land in
 * its pool's sandbox when the job starts and leave it at Uploading.
 *
 * The tree is cloned here, in the host's namespace, from an fd the caller resolved
 * (open_tree OPEN_TREE_CLONE: a detached copy), made read-only with mount_setattr when
 * asked, and attached by a forked child that entered the sandbox's mount namespace
 * (setns is per process and refused to a threaded one: never in the caller).  Inside,
 * the target is resolved from the sandbox's root with no symlink followed at all and
 * the mount goes onto that very fd (move_mount T_EMPTY_PATH): nothing the job made in
 * the meantime can redirect it.
 */
#include "labd/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "labd/log.h"
#include "sandbox/resolve.h"
#include "sandbox/state.h"

#define INSIDE_RESOLVE (RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

static int errf(struct sandbox_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int errf(struct sandbox_error *err, const char *fmt, ...)
{
	struct sandbox_error none;
	va_list ap;

	err = err ? err : &none;
	snprintf(err->step, sizeof(err->step), "inject");
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	log_error("%s", err->message);
	return -1;
}

/* The sandbox's mount namespace, checked to belong to the init h names (not a process
 * that got its pid since). */
static int open_mnt_ns(const struct sandbox_handle *h)
{
	char path[64];
	int fd;

	if (h->pid <= 0 || sandbox_proc_start_ticks(h->pid) != h->start_time_ticks) {
		errno = ESRCH;
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)h->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && sandbox_proc_start_ticks(h->pid) != h->start_time_ticks) {
		close(fd);
		errno = ESRCH;
		return -1;
	}
	return fd;
}

/* In the child: enter the namespace, resolve dst from its root (no symlinks), and run
 * op on the fd.  Writes errno to report on failure; the exit status says which part. */
enum inside_op { OP_ATTACH, OP_DETACH };

static _Noreturn void inside(int ns_fd, const char *dst, enum inside_op op, int tree, int report)
{
	int root, fd, e;

	if (setns(ns_fd, CLONE_NEWNS) < 0)
		goto fail;
	/* setns put our root and cwd at the namespace's root: the sandbox's "/" */
	if ((root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		goto fail;
	fd = resolve_open(root, dst, O_PATH | O_DIRECTORY | O_CLOEXEC, INSIDE_RESOLVE);
	if (fd < 0)
		goto fail;
	if (op == OP_ATTACH) {
		if (move_mount(tree, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
			goto fail;
	} else {
		/* fd is the root of the top mount on dst: detach exactly that one */
		if (fchdir(fd) < 0 || umount2(".", MNT_DETACH) < 0)
			goto fail;
	}
	_exit(0);
fail:
	e = errno;
	if (write(report, &e, sizeof(e)) < 0)
		_exit(2);
	_exit(1);
}

/* Forks the child that does op inside; 0, or -1 with errno set. */
static int run_inside(const struct sandbox_handle *h, const char *dst, enum inside_op op, int tree)
{
	int ns_fd, p[2], e = 0, st;
	pid_t pid;

	if ((ns_fd = open_mnt_ns(h)) < 0)
		return -1;
	if (pipe2(p, O_CLOEXEC) < 0) {
		e = errno;
		close(ns_fd);
		errno = e;
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		inside(ns_fd, dst, op, tree, p[1]);
	}
	e = errno;
	close(ns_fd);
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		errno = e;
		return -1;
	}
	e = 0;
	if (read(p[0], &e, sizeof(e)) != sizeof(e))
		e = 0;
	close(p[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
	}
	if (e || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		errno = e ? e : EIO;
		return -1;
	}
	return 0;
}

/* An absolute inside path without ".." (RESOLVE_IN_ROOT would keep it inside anyway;
 * a caller that sends one has a bug worth seeing). */
static bool dst_ok(const char *dst)
{
	if (!dst || dst[0] != '/' || !dst[1] || strlen(dst) >= SANDBOX_PATH_MAX)
		return false;
	for (const char *p = dst; p; p = strchr(p + 1, '/'))
		if (strncmp(p, "/..", 3) == 0 && (p[3] == '/' || p[3] == '\0'))
			return false;
	return true;
}

int sandbox_inject(const struct sandbox_handle *h, int src_fd, const char *dst, bool ro,
		   struct sandbox_error *err)
{
	/* private: a clone of a shared host mount (systemd makes "/" shared) would join its
	 * peer group, and mount events would travel between the host and the sandbox */
	struct mount_attr attr = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
					      (ro ? MOUNT_ATTR_RDONLY : 0),
				  .propagation = MS_PRIVATE};
	int tree, rc;

	if (!dst_ok(dst))
		return errf(err, "sandbox %s: inject: bad target %s", h->id, dst ? dst : "(none)");
	tree = open_tree(src_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (tree < 0)
		return errf(err, "sandbox %s: inject %s: clone the source: %s", h->id, dst, strerror(errno));
	/* recursive: whatever is mounted below the source comes read-only too */
	if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0) {
		rc = errno;
		close(tree);
		return errf(err, "sandbox %s: inject %s: mount attributes: %s", h->id, dst, strerror(rc));
	}
	rc = run_inside(h, dst, OP_ATTACH, tree);
	if (rc < 0) {
		rc = errno;
		close(tree);
		return errf(err, "sandbox %s: inject %s: %s", h->id, dst,
			    rc == ELOOP ? "a symlink on the way (never followed)" : strerror(rc));
	}
	close(tree);
	return 0;
}

int sandbox_eject(const struct sandbox_handle *h, const char *dst)
{
	if (!dst_ok(dst))
		return log_error("sandbox %s: eject: bad target %s", h->id, dst ? dst : "(none)");
	if (run_inside(h, dst, OP_DETACH, -1) < 0)
		return log_errno("sandbox %s: eject %s", h->id, dst);
	return 0;
}
