/* privdrop.c - see privdrop.h. */
#include "labd/privdrop.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "labd/log.h"

int privdrop_lookup(const char *name, struct privdrop_user *out)
{
	struct passwd pw, *res = NULL;
	char buf[4096];

	if (getpwnam_r(name, &pw, buf, sizeof(buf), &res) != 0 || !res)
		return log_error("system user %s does not exist (deploy/install-deps.sh creates it)",
				 name);
	if (pw.pw_uid == 0 || pw.pw_gid == 0)
		return log_error("system user %s must not be root", name);
	out->uid = pw.pw_uid;
	out->gid = pw.pw_gid;
	snprintf(out->name, sizeof(out->name), "%s", name);
	return 0;
}

/* mkdir -p with mode for the last component only. */
static int make_dirs(const char *path, mode_t mode)
{
	char tmp[512];

	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return log_error("path too long: %s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
			return log_errno("mkdir %s", tmp);
		*p = '/';
	}
	if (mkdir(tmp, mode) < 0 && errno != EEXIST)
		return log_errno("mkdir %s", tmp);
	return 0;
}

int privdrop_prepare_state_dir(const char *state_dir, const struct privdrop_user *u)
{
	static const char *const files[] = {"labd.db", "labd.db-wal", "labd.db-shm"};
	int dfd;

	if (make_dirs(state_dir, 0750) < 0)
		return -1;
	/* fd-relative from here: a symlink swapped in cannot redirect the chown. */
	dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return log_errno("open %s", state_dir);
	/* root:labd 01770: labd creates its database files here; the sticky bit
	 * keeps it from renaming root's subdirectories (homes, runtimes); and a
	 * sandbox being built (host root without capabilities over host inodes)
	 * can still traverse it as the owner. */
	if (fchown(dfd, 0, u->gid) < 0 || fchmod(dfd, 01770) < 0) {
		close(dfd);
		return log_errno("chown %s", state_dir);
	}
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (fchownat(dfd, files[i], u->uid, u->gid, AT_SYMLINK_NOFOLLOW) < 0 &&
		    errno != ENOENT)
			log_warn("chown %s/%s: %s", state_dir, files[i], strerror(errno));
	close(dfd);
	return 0;
}

int privdrop_to(const struct privdrop_user *u)
{
	/* Empty the bounding set first, while CAP_SETPCAP is still held, so even a
	 * later exec of a file-capability binary gains nothing. */
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return log_errno("drop capability %d from the bounding set", cap);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return log_errno("clear ambient capabilities");
	if (setgroups(0, NULL) < 0)
		return log_errno("setgroups");
	if (setresgid(u->gid, u->gid, u->gid) < 0)
		return log_errno("setresgid %u", (unsigned)u->gid);
	/* setresuid from 0 to non-zero clears the permitted and effective sets. */
	if (setresuid(u->uid, u->uid, u->uid) < 0)
		return log_errno("setresuid %u", (unsigned)u->uid);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return log_errno("set no_new_privs");
	if (setuid(0) == 0 || geteuid() == 0)
		return log_error("privilege drop did not stick");
	return 0;
}
