/* backup_reown.c - a home image's files given from one host uid to another; see
 * backup_int.h.
 *
 * A sandbox maps one host uid (uid_base + user id) to its user, so an archived
 * home of a deleted user (ids are never reused) restored into a new account would
 * hold files that user cannot touch. The image is a fresh copy nobody else has
 * open: it is mounted (nodev, nosuid, noexec) in a private mount namespace of a
 * child process, on a folder under the root-only homes/, and walked without
 * following links, every inode owned by the old uid or gid given the new one.
 * The namespace ends with the child, and with it the mount. */
#include "web/backup_int.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "labd/log.h"

#define WALK_FDS 64

static uid_t walk_from, walk_to;
static long walk_changed;

static int reown_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	uid_t uid = st->st_uid == walk_from ? walk_to : st->st_uid;
	gid_t gid = st->st_gid == walk_from ? walk_to : st->st_gid;

	(void)flag;
	(void)ftw;
	if (uid == st->st_uid && gid == st->st_gid)
		return 0;
	if (lchown(path, uid, gid) < 0) {
		log_errno("chown %s", path);
		return 1;
	}
	walk_changed++;
	return 0;
}

static int run_mount(const char *image, const char *dir)
{
	static char *const env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
	int st;
	pid_t pid = fork();

	if (pid < 0)
		return log_errno("fork");
	if (pid == 0) {
		execle("/bin/mount", "mount", "-t", "ext4", "-o", "loop,nodev,nosuid,noexec", image,
		       dir, (char *)NULL, env);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : log_error("mount %s failed", image);
}

/* The child: its own mount namespace, the mount, the walk. Exit status 0 or 1. */
static int reown_child(const char *image, const char *dir)
{
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return log_errno("private mount namespace");
	if (run_mount(image, dir) < 0)
		return -1;
	if (nftw(dir, reown_one, WALK_FDS, FTW_PHYS | FTW_MOUNT) != 0)
		return log_error("giving the files of %s to uid %u failed part-way", image,
				 (unsigned)walk_to);
	log_info("restore-home: %ld files of uid %u given to uid %u", walk_changed,
		 (unsigned)walk_from, (unsigned)walk_to);
	return umount2(dir, 0) < 0 ? log_errno("umount %s", dir) : 0;
}

int backup_reown(const char *state_dir, const char *image, uid_t from, uid_t to)
{
	char dir[BACKUP_PATH_MAX];
	int st = 0;
	pid_t pid;

	/* a dot name: the supervisor's home sweep and gc pass it by */
	snprintf(dir, sizeof(dir), "%s/homes/.reown-XXXXXX", state_dir);
	if (!mkdtemp(dir))
		return log_errno("mkdtemp %s", dir);
	walk_from = from;
	walk_to = to;
	if ((pid = fork()) < 0) {
		log_errno("fork");
		st = -1;
	} else if (pid == 0) {
		_exit(reown_child(image, dir) < 0 ? 1 : 0);
	}
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	rmdir(dir);
	return pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}
