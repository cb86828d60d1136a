/* readable.c - see readable.h. */
#include "supervisor/readable.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define READABLE_PATH_MAX 4096

/* Owner and mode set on fd, which must be a regular file. 0 or -errno. */
static int settle(int fd, gid_t gid, mode_t mode)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (fchown(fd, 0, gid) < 0 || fchmod(fd, mode) < 0)
		return -errno;
	return 0;
}

/* The file made unnamed in path's directory, settled, then linked as path.
 * -EEXIST when another writer linked it first; -EOPNOTSUPP (or what open
 * said) where the file system has no O_TMPFILE. */
static int create_settled(const char *path, gid_t gid, mode_t mode)
{
	char dir[READABLE_PATH_MAX], proc[64];
	int fd, rc;

	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return -ENAMETOOLONG;
	fd = open(dirname(dir), O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	/* linked through /proc: AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH, which a
	 * supervisor run under a narrowed bounding set may lack */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if ((rc = settle(fd, gid, mode)) == 0 &&
	    linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0)
		rc = -errno;
	/* closed either way: the caller opens the name the one way it opens a file
	 * that was already there */
	close(fd);
	return rc;
}

int readable_open_append(const char *path, gid_t gid, mode_t mode)
{
	const int flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW;
	int fd, rc;

	for (int tries = 0;; tries++) {
		fd = open(path, flags);
		if (fd >= 0 || errno != ENOENT || tries == 2)
			break;
		rc = create_settled(path, gid, mode);
		if (rc == -EOPNOTSUPP || rc == -EISDIR) { /* no O_TMPFILE: the plain way */
			fd = open(path, flags | O_CREAT, mode);
			break;
		}
		if (rc < 0 && rc != -EEXIST) /* EEXIST: another writer made it, open theirs */
			return rc;
	}
	if (fd < 0)
		return -errno;
	if ((rc = settle(fd, gid, mode)) < 0) {
		close(fd);
		return rc;
	}
	return fd;
}
