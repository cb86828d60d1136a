/* statedir.c - see statedir.h. */
#include "supervisor/statedir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "labd/log.h"
#include "sandbox/state.h"

static const struct {
	const char *name;
	mode_t mode;
	bool labd_group; /* labd-web passes through it (Jupyter sockets) or reads it (job logs) */
} dirs[] = {
	{"homes", 0700, false},	    {"runtimes", 0710, true}, {"boxes", 0700, false},
	{"sandboxes", 0700, false}, {"archive", 0700, false}, {"pools", 0700, false},
	{"joblogs", 0750, true}, /* the mode statedir_prepare is given */    {"keepers", 0700, false}, /* keeper.h's sockets */
};

/* One directory: made if missing, then checked through an fd opened without
 * following links, so what is checked is what gets chowned. */
static int prepare_one(int dfd, const char *state_dir, size_t i, gid_t labd_gid,
		       mode_t joblogs_mode)
{
	mode_t mode = !strcmp(dirs[i].name, "joblogs") ? joblogs_mode : dirs[i].mode;
	struct stat st;
	int fd;

	if (mkdirat(dfd, dirs[i].name, dirs[i].mode) < 0 && errno != EEXIST)
		return log_errno("mkdir %s/%s", state_dir, dirs[i].name);
	if (fstatat(dfd, dirs[i].name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return log_errno("stat %s/%s", state_dir, dirs[i].name);
	if (!S_ISDIR(st.st_mode))
		return log_error("%s/%s is not a directory (mode %o): refusing to start; "
				 "someone planted it, remove it by hand", state_dir, dirs[i].name,
				 (unsigned)st.st_mode);
	if (st.st_uid != 0)
		return log_error("%s/%s is owned by uid %u, not root: refusing to start; "
				 "someone planted it, remove it by hand", state_dir, dirs[i].name,
				 (unsigned)st.st_uid);
	fd = openat(dfd, dirs[i].name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return log_errno("open %s/%s", state_dir, dirs[i].name);
	if (fchown(fd, 0, dirs[i].labd_group ? labd_gid : 0) < 0 ||
	    fchmod(fd, mode) < 0) {
		close(fd);
		return log_errno("chown %s/%s", state_dir, dirs[i].name);
	}
	close(fd);
	return 0;
}

int statedir_prepare(const char *state_dir, const char *home_images, gid_t labd_gid,
		     mode_t joblogs_mode)
{
	int dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int rc = 0;

	if (dfd < 0)
		return log_errno("open %s", state_dir);
	/* every sandbox this process builds keeps its paths in here */
	sandbox_state_confine(home_images);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]) && rc == 0; i++)
		rc = prepare_one(dfd, state_dir, i, labd_gid, joblogs_mode);
	close(dfd);
	return rc;
}

/* A POSIX record lock, not flock: forked workers do not inherit it, so an orphaned
 * worker of a killed labd does not keep the next one (or doctor --fix) out, and the
 * kernel drops it when the supervisor dies, however it dies. */
static int lock_open(const char *state_dir)
{
	char path[4096];

	if (snprintf(path, sizeof(path), "%s/" STATEDIR_LOCK, state_dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	return fd < 0 ? -errno : fd;
}

int statedir_lock(const char *state_dir)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	int fd = lock_open(state_dir);
	pid_t holder;

	if (fd < 0) {
		log_error("open %s/" STATEDIR_LOCK ": %s", state_dir, strerror(-fd));
		return fd;
	}
	if (fcntl(fd, F_SETLK, &fl) == 0)
		return fd; /* kept open for the process's life */
	close(fd);
	holder = statedir_lock_holder(state_dir);
	log_error("another labd (pid %d) runs on the state dir %s", (int)holder, state_dir);
	return -EBUSY;
}

pid_t statedir_lock_holder(const char *state_dir)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	int fd = lock_open(state_dir);

	if (fd < 0)
		return fd == -ENOENT ? 0 : fd;
	if (fcntl(fd, F_GETLK, &fl) < 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	close(fd);
	return fl.l_type == F_UNLCK ? 0 : fl.l_pid;
}
