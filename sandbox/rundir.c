/* rundir.c - the run dir as a size-capped tmpfs; see rundir.h. */
#include "sandbox/rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "sandbox/fail.h"

/* 1 when dir is the root of a mount, with *tmpfs telling whether it is a tmpfs; 0 when
 * not a mount point; -1 on error.  Opened without following a link in the last
 * component, so a planted link never makes us unmount what it points at. */
static int mount_root(const char *dir, int *tmpfs)
{
	struct statx sx;
	struct statfs sf;
	int fd = open(dir, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC), rc = -1;

	if (fd < 0)
		return -1;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &sx) == 0 && fstatfs(fd, &sf) == 0) {
		*tmpfs = sf.f_type == TMPFS_MAGIC;
		rc = (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
		     (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
	}
	close(fd);
	return rc;
}

int rundir_unmount(const char *dir)
{
	int tmpfs = 0, rc;

	/* a start that crashed and was retried may have stacked more than one */
	for (int i = 0; i < 8; i++) {
		rc = mount_root(dir, &tmpfs);
		if (rc <= 0 || !tmpfs)
			return rc < 0 && errno != ENOENT ? -1 : 0;
		if (umount2(dir, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
			return -1;
	}
	errno = EBUSY;
	return -1;
}

int rundir_mount(const char *dir, uid_t uid)
{
	char opts[128];
	struct stat st;
	int tmpfs = 0;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return fail_errno("mkdir %s", dir);
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return fail_error("%s: not a directory", dir);
	if (mount_root(dir, &tmpfs) > 0 && !tmpfs)
		return fail_error("%s: already a mount point", dir);
	if (rundir_unmount(dir) < 0)
		return fail_errno("unmount the old run dir %s", dir);
	snprintf(opts, sizeof(opts), "size=%u,nr_inodes=%u,mode=0700,uid=%u,gid=%u", RUNDIR_BYTES,
		 RUNDIR_INODES, (unsigned)uid, (unsigned)uid);
	if (mount("labd-run", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0)
		return fail_errno("mount tmpfs on %s", dir);
	return 0;
}
