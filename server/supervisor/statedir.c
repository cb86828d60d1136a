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
	{"joblogs", 0750, true},    {"keepers", 0700, false}, /* keeper.h's sockets */
};

/* One directory: made if missing, then checked through an fd opened without
 * following links, so what is checked is what gets chowned. */
static int prepare_one(int dfd, const char *state_dir, size_t i, gid_t labd_gid)
{
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
	    fchmod(fd, dirs[i].mode) < 0) {
		close(fd);
		return log_errno("chown %s/%s", state_dir, dirs[i].name);
	}
	close(fd);
	return 0;
}

int statedir_prepare(const char *state_dir, gid_t labd_gid)
{
	int dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int rc = 0;

	if (dfd < 0)
		return log_errno("open %s", state_dir);
	/* every sandbox this process builds keeps its paths in here */
	sandbox_state_confine();
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]) && rc == 0; i++)
		rc = prepare_one(dfd, state_dir, i, labd_gid);
	close(dfd);
	return rc;
}
