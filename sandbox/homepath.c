/* homepath.c - sandbox_home_open_beneath: a folder of a sandbox's home, opened by root on
 * the host for injection into a job's sandbox (docs/sandbox.md, "Injection").  The home
 * is found where the sandbox's state file says it was mounted (home.h: by user id),
 * never by user name, so a deleted user's mount never serves a namesake.
 *
 * The home is the user's own file system: any component may be a symlink the user
 * made, to /etc or to another user's files.  Every lookup is openat2 from the home's
 * mount root with RESOLVE_BENEATH (no absolute link, no ".." above the root),
 * RESOLVE_NO_MAGICLINKS and RESOLVE_NO_XDEV (never onto another mount), so a link
 * resolves only when it stays in the home.  Missing folders are made one component at
 * a time under a parent opened the same way and handed to the user (mode 0755).
 */
#include "labd/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "labd/log.h"
#include "sandbox/home.h"
#include "sandbox/homescratch.h"
#include "sandbox/resolve.h"
#include "sandbox/state.h"

#define HOME_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
#define REL_MAX 1024

static int errf(struct sandbox_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int errf(struct sandbox_error *err, const char *fmt, ...)
{
	struct sandbox_error none;
	va_list ap;
	int e = errno;

	err = err ? err : &none;
	snprintf(err->step, sizeof(err->step), "home");
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	log_error("%s", err->message);
	errno = e;
	return -1;
}

/* Home-relative (docs/jobs.md): no leading "/", no ".." component, at most REL_MAX. */
static bool rel_ok(const char *rel)
{
	size_t n = strnlen(rel, REL_MAX + 1);

	if (n > REL_MAX || rel[0] == '/')
		return false;
	for (const char *p = rel; p; p = strchr(p, '/')) {
		p += *p == '/';
		if (strncmp(p, "..", 2) == 0 && (p[2] == '/' || p[2] == '\0'))
			return false;
	}
	return true;
}

/* The sandbox's state file, which says where it mounted its home: by the
 * user's id, or by name when the release before started it (home.h). */
static int home_state(const struct sandbox_handle *h, struct sandbox_state *st)
{
	if (sandbox_state_load(h->state_path, st) < 0)
		return -1;
	if (!st->home_image[0] && !st->scratch_home) {
		errno = ENOENT;
		return -1;
	}
	return 0;
}

/* Where the home of the sandbox st records is mounted on the host: its scratch
 * home's tmpfs, or its image's mount. */
static int mount_path(const char *state_dir, const struct sandbox_state *st, char *buf,
		      size_t len)
{
	return st->scratch_home ? homescratch_path(state_dir, st->id, buf, len)
				: home_mount_path(state_dir, st->home_key, buf, len);
}

int sandbox_home_mount_path(const char *state_dir, const struct sandbox_handle *h, char *buf,
			    size_t len)
{
	struct sandbox_state st;

	if (home_state(h, &st) < 0)
		return -1;
	if (mount_path(state_dir, &st, buf, len) < 0) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* The mounted home's root; a mount point with nothing on it is refused (we would
 * be writing into the state dir). */
static int open_home_root(const char *state_dir, const struct sandbox_state *sst,
			  struct sandbox_error *err)
{
	char mnt[SANDBOX_PATH_MAX];
	struct stat st, up;
	int fd;

	if (mount_path(state_dir, sst, mnt, sizeof(mnt)) < 0)
		return errf(err, "home of %s: path too long", sst->user);
	fd = open(mnt, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errf(err, "home of %s: open %s: %s", sst->user, mnt, strerror(errno));
	if (fstat(fd, &st) < 0 || fstatat(fd, "..", &up, 0) < 0 || st.st_dev == up.st_dev) {
		close(fd);
		errno = ENOENT;
		return errf(err, "home of %s: not mounted at %s", sst->user, mnt);
	}
	return fd;
}

/* mkdir of one component below parent (an fd from open beneath), handed to owner. */
static int make_one(int parent, const char *name, uid_t owner)
{
	int fd;

	if (mkdirat(parent, name, 0755) < 0)
		return errno == EEXIST ? 0 : -1;
	fd = resolve_open(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
			  HOME_RESOLVE | RESOLVE_NO_SYMLINKS);
	if (fd < 0)
		return -1;
	/* fchmod: the supervisor's umask must not decide what the user can do */
	if (fchown(fd, owner, owner) < 0 || fchmod(fd, 0755) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	close(fd);
	return 0;
}

/* Makes every missing component of rel (beneath root). 0 or -1 with errno. */
static int make_path(int root, const char *rel, uid_t owner)
{
	char path[REL_MAX + 1];
	int rc = 0;

	snprintf(path, sizeof(path), "%s", rel);
	for (char *p = path; rc == 0 && *p;) {
		char *slash = strchr(p, '/');
		char *name = p;
		int parent;

		if (slash)
			*slash = '\0';
		/* the parent prefix, resolved beneath the home's root like everything else */
		if (name == path)
			parent = fcntl(root, F_DUPFD_CLOEXEC, 0);
		else {
			name[-1] = '\0';
			parent = resolve_open(root, path, O_PATH | O_DIRECTORY | O_CLOEXEC, HOME_RESOLVE);
			name[-1] = '/';
		}
		if (parent < 0)
			return -1;
		if (*name && strcmp(name, ".") != 0)
			rc = make_one(parent, name, owner);
		close(parent);
		if (!slash)
			break;
		*slash = '/';
		p = slash + 1;
	}
	return rc;
}

int sandbox_home_open_beneath(const char *state_dir, const struct sandbox_handle *h,
			      const char *rel, bool create, uid_t owner, int *out_fd,
			      struct sandbox_error *err)
{
	struct sandbox_state st;
	const char *user = st.user;
	int root, fd;

	*out_fd = -1;
	if (home_state(h, &st) < 0)
		return errf(err, "home of sandbox %s: %s", h->id,
			    errno == ENOENT ? "it has none" : "its state file is unreadable");
	if (!rel || !rel_ok(rel)) {
		errno = EINVAL;
		return errf(err, "home of %s: bad home-relative path %.64s", user, rel ? rel : "(none)");
	}
	if ((root = open_home_root(state_dir, &st, err)) < 0)
		return -1;
	if (create && make_path(root, rel, owner) < 0) {
		int e = errno;
		close(root);
		errno = e;
		return errf(err, "home of %s: make %s: %s", user, rel, strerror(e));
	}
	fd = resolve_open(root, rel[0] ? rel : ".", O_PATH | O_DIRECTORY | O_CLOEXEC, HOME_RESOLVE);
	if (fd < 0) {
		int e = errno;
		close(root);
		errno = e;
		return errf(err, "home of %s: open %s: %s", user, rel,
			    e == EXDEV ? "leaves the home (a symlink or another mount)" : strerror(e));
	}
	close(root);
	*out_fd = fd;
	return 0;
}
