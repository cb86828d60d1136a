/* homescratch.c - a sandbox's scratch home; see homescratch.h. */
#include "sandbox/homescratch.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "labd/log.h"
#include "labd/sandbox.h"
#include "sandbox/fail.h"
#include "sandbox/home.h"

static int dir_path(const char *state_dir, const char *id, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/scratch/%s", state_dir, id);
	return n < 0 || (size_t)n >= size ? -1 : 0;
}

int homescratch_path(const char *state_dir, const char *id, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/scratch/%s/mnt", state_dir, id);
	return n < 0 || (size_t)n >= size ? -1 : 0;
}

static int make_dirs(const char *state_dir, const char *id, char *dir, char *mnt)
{
	char top[SANDBOX_PATH_MAX];

	snprintf(top, sizeof(top), "%s/scratch", state_dir);
	if (dir_path(state_dir, id, dir, SANDBOX_PATH_MAX) < 0 ||
	    homescratch_path(state_dir, id, mnt, SANDBOX_PATH_MAX) < 0)
		return fail_error("scratch home of %s: path too long", id);
	if (mkdir(top, 0700) < 0 && errno != EEXIST)
		return fail_errno("mkdir %s", top);
	if (mkdir(dir, 0700) < 0)
		return fail_errno("mkdir %s", dir);
	return 0;
}

int homescratch_make(const char *state_dir, const char *id, uint64_t size_bytes, uid_t owner)
{
	char dir[SANDBOX_PATH_MAX], mnt[SANDBOX_PATH_MAX], opts[128];

	if (make_dirs(state_dir, id, dir, mnt) < 0)
		return -1;
	snprintf(opts, sizeof(opts), "size=%llu,mode=0700,uid=%u,gid=%u",
		 (unsigned long long)size_bytes, (unsigned)owner, (unsigned)owner);
	if (home_seal_dir(dir) < 0) {
		rmdir(dir);
		return -1;
	}
	if (mkdir(mnt, 0700) < 0 ||
	    mount("labd-scratch", mnt, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0) {
		fail_errno("scratch home at %s", mnt);
		homescratch_remove(state_dir, id);
		return -1;
	}
	return 0;
}

int homescratch_remove(const char *state_dir, const char *id)
{
	char dir[SANDBOX_PATH_MAX], mnt[SANDBOX_PATH_MAX];
	int rc = 0;

	if (dir_path(state_dir, id, dir, sizeof(dir)) < 0 ||
	    homescratch_path(state_dir, id, mnt, sizeof(mnt)) < 0 || access(dir, F_OK) < 0)
		return 0;
	/* the tmpfs, then the directory's bind: whatever is not mounted is EINVAL */
	if (umount2(mnt, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT)
		rc = log_errno("unmount %s", mnt);
	if (umount2(dir, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL)
		rc = log_errno("unmount %s", dir);
	if ((rmdir(mnt) < 0 && errno != ENOENT) || rmdir(dir) < 0)
		rc = log_errno("remove %s", dir);
	return rc;
}
