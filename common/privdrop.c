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

/* Opens dir name under dfd as a directory, never through a link; -1 (logged). */
static int open_dir_at(int dfd, const char *name, const char *shown)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		log_error("%s/%s is not a directory (a link, or missing: %s): refusing to use it",
			  shown, name, strerror(errno));
	return fd;
}

/* Moves a database of the old layout (files directly in the state dir) into
 * db/. The main file moves last, so a crash part-way leaves it where this
 * step looks for it and the next boot finishes the move; a WAL moved
 * without its database would be lost, one left behind would be ignored. */
static int migrate_db(int dfd, int dbfd, const char *shown)
{
	static const char *const files[] = {"labd.db-wal", "labd.db-shm", "labd.db"};
	struct stat st;

	if (fstatat(dfd, "labd.db", &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : log_errno("stat %s/labd.db", shown);
	if (fstatat(dbfd, "labd.db", &st, AT_SYMLINK_NOFOLLOW) == 0)
		return log_error("%s/labd.db and %s/db/labd.db both exist: move one away by hand",
				 shown, shown);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (renameat(dfd, files[i], dbfd, files[i]) < 0 && errno != ENOENT)
			return log_errno("move %s/%s into db/", shown, files[i]);
	log_info("moved the database into %s/db/", shown);
	return 0;
}

int privdrop_prepare_state_dir(const char *state_dir, const struct privdrop_user *u)
{
	static const char *const files[] = {"labd.db", "labd.db-wal", "labd.db-shm"};
	int dfd, dbfd = -1, rc = -1;

	if (make_dirs(state_dir, 0710) < 0)
		return -1;
	/* fd-relative from here: a symlink swapped in cannot redirect the chown. */
	dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return log_errno("open %s", state_dir);
	/* root:labd 0710: labd may only pass through (to db/ and the Jupyter
	 * sockets under runtimes/); it can create no name here that root would
	 * later trust (the review's planted sandboxes/). */
	if (fchown(dfd, 0, u->gid) < 0 || fchmod(dfd, 0710) < 0) {
		log_errno("chown %s", state_dir);
		goto out;
	}
	if (mkdirat(dfd, "db", 0700) < 0 && errno != EEXIST) {
		log_errno("mkdir %s/db", state_dir);
		goto out;
	}
	/* db/ is the web process's own: root only moves and chowns in it */
	if ((dbfd = open_dir_at(dfd, "db", state_dir)) < 0)
		goto out;
	if (fchown(dbfd, u->uid, u->gid) < 0 || fchmod(dbfd, 0700) < 0) {
		log_errno("chown %s/db", state_dir);
		goto out;
	}
	if (migrate_db(dfd, dbfd, state_dir) < 0)
		goto out;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (fchownat(dbfd, files[i], u->uid, u->gid, AT_SYMLINK_NOFOLLOW) < 0 &&
		    errno != ENOENT)
			log_warn("chown %s/db/%s: %s", state_dir, files[i], strerror(errno));
	rc = 0;
out:
	if (dbfd >= 0)
		close(dbfd);
	close(dfd);
	return rc;
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
