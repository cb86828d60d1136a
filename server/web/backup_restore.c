/* backup_restore.c - `labd restore DIR --state-dir NEW` and `labd restore-home USER
 * --from IMAGE`; see backup_int.h.
 *
 * A restore writes only into a state dir nobody uses yet: it refuses a folder
 * with anything in it, checks every checksum before it copies a byte, and a
 * failure part-way removes what it wrote. A home's restore swaps one image
 * under the home's lock (the one a start takes to mount it), refused while any
 * sandbox of the user holds the home, and moves the image it replaces to the
 * archive, where the archive's retention applies to it. */
#include "web/backup_int.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "labd/log.h"
#include "labd/privdrop.h"
#include "sandbox/home.h"
#include "store/db.h"

/* Who owns a restored file: the web process's store, its readable job logs (its
 * own on a Slurm head, where it writes the copies it pulls: docs/slurm.md "Job
 * logs"), root's everything else (statedir.c and privdrop.c make the same at start). */
static void set_owner(const char *rel, const char *path, const struct privdrop_user *u,
		      bool head)
{
	int rc = 0;

	if (strncmp(rel, "db/", 3) == 0)
		rc = chown(path, u->uid, u->gid);
	else if (strncmp(rel, "joblogs/", 8) == 0)
		rc = chown(path, head ? u->uid : 0, u->gid) < 0 ? -1 : chmod(path, 0640);
	if (rc < 0)
		log_errno("chown %s", path);
}

/* NEW must not exist, or be an empty folder. 1 made, 0 was there, -1 refused. */
static int new_state_dir(const char *dir)
{
	int rc = backup_new_dir(dir, 0710);

	if (rc == -ENOTEMPTY)
		return log_error("%s is not empty: refused (restore only into a new or empty "
				 "state dir)", dir);
	return rc;
}

/* What a restore made, so that a failure removes exactly that. */
struct restored {
	size_t copied;	  /* files of the manifest, in its order */
	char made[4][16]; /* the folders it made (db, homes, joblogs) */
	size_t n_made;
	bool made_dir;	  /* NEW itself */
};

/* Undoes a restore that failed part-way: the files copied, then the folders. */
static void remove_restored(const char *dir, json_t *files, const struct restored *r)
{
	char path[BACKUP_PATH_MAX];
	json_t *f;
	size_t i;

	json_array_foreach(files, i, f) {
		if (i >= r->copied)
			break;
		snprintf(path, sizeof(path), "%s/%s", dir,
			 json_string_value(json_object_get(f, "path")));
		unlink(path);
	}
	for (i = 0; i < r->n_made; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, r->made[i]);
		rmdir(path);
	}
	if (r->made_dir)
		rmdir(dir);
}

/* The folder of rel (its first component), made if missing and noted. */
static int make_folder(const char *to, const char *rel, struct restored *r)
{
	const char *slash = strchr(rel, '/');
	char dst[BACKUP_PATH_MAX];
	int n;

	if (!slash)
		return 0;
	n = (int)(slash - rel);
	snprintf(dst, sizeof(dst), "%s/%.*s", to, n, rel);
	if (mkdir(dst, 0700) < 0)
		return errno == EEXIST ? 0 : log_errno("mkdir %s", dst);
	if (r->n_made < sizeof(r->made) / sizeof(r->made[0]))
		snprintf(r->made[r->n_made++], sizeof(r->made[0]), "%.*s", n, rel);
	return 0;
}

static int copy_all(const char *from, const char *to, json_t *files, const struct privdrop_user *u,
		    bool head, struct restored *r)
{
	char src[BACKUP_PATH_MAX], dst[BACKUP_PATH_MAX];
	json_t *f;
	size_t i;

	json_array_foreach(files, i, f) {
		const char *rel = json_string_value(json_object_get(f, "path"));
		if (make_folder(to, rel, r) < 0)
			return -1;
		snprintf(src, sizeof(src), "%s/%s", from, rel);
		snprintf(dst, sizeof(dst), "%s/%s", to, rel);
		if (backup_copy_file(src, dst) < 0)
			return -1;
		r->copied = i + 1;
		set_owner(rel, dst, u, head);
		printf("restored %s\n", rel);
	}
	return 0;
}

static int cmd_restore(const struct labd_config *cfg, const char *from, const char *to)
{
	struct privdrop_user u;
	struct restored r = {0};
	json_t *m = NULL, *files;
	int made, rc = -1, schema;

	umask(077);
	if (privdrop_lookup(cfg->user, &u) < 0)
		return -1;
	if (backup_verify(from, &m) < 0) {
		log_error("restore refused: the backup %s does not verify", from);
		goto out;
	}
	files = json_object_get(m, "files");
	schema = (int)json_integer_value(json_object_get(m, "schema_version"));
	if (schema > db_latest_version()) {
		log_error("restore refused: the backup's store is of schema %d, this labd knows "
			  "up to %d (restore it with a labd at least as new as the one that made it)",
			  schema, db_latest_version());
		goto out;
	}
	if ((made = new_state_dir(to)) < 0)
		goto out;
	r.made_dir = made == 1;
	if (copy_all(from, to, files, &u, strcmp(cfg->backend_kind, "slurm") == 0, &r) < 0) {
		remove_restored(to, files, &r);
		log_error("restore failed: what it had written to %s is removed again", to);
		goto out;
	}
	printf("restored %zu files into %s: set [server] state_dir = %s and start labd\n",
	       json_array_size(files), to, to);
	rc = 0;
out:
	json_decref(m);
	return rc;
}

int backup_restore(const struct labd_config *cfg, int argc, char **argv)
{
	const char *from = NULL, *to = NULL;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--state-dir") == 0 && i + 1 < argc)
			to = argv[++i];
		else if (argv[i][0] != '-' && !from)
			from = argv[i];
		else
			return 2;
	}
	if (!from || !to)
		return 2;
	return cmd_restore(cfg, from, to) < 0 ? 1 : 0;
}

/* ---- one user's home ---- */

/* The owner of the image's root directory (inode 2), read by debugfs without
 * mounting it; -1 when it cannot be read. */
static long long image_owner(const char *image)
{
	static char *const env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
	char buf[4096], *user;
	ssize_t n, len = 0;
	int p[2], st;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0 || (pid = fork()) < 0)
		return log_errno("debugfs");
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		dup2(p[1], STDOUT_FILENO);
		dup2(null, STDIN_FILENO);
		dup2(null, STDERR_FILENO);
		execle("/sbin/debugfs", "debugfs", "-R", "stat <2>", image, (char *)NULL, env);
		execle("/usr/sbin/debugfs", "debugfs", "-R", "stat <2>", image, (char *)NULL, env);
		_exit(127);
	}
	close(p[1]);
	while (len < (ssize_t)sizeof(buf) - 1 && (n = read(p[0], buf + len, sizeof(buf) - 1 - len)) > 0)
		len += n;
	close(p[0]);
	buf[len] = '\0';
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!(user = strstr(buf, "User:")))
		return log_error("debugfs could not read the owner of %s", image);
	return strtoll(user + 5, NULL, 10);
}

/* IMAGE is a clean home: a regular file not attached to a loop device,
 * e2fsck-clean, its root owned by the user's host uid (or, with reown, by
 * another one: its owner into *owner). */
static int check_image(const struct labd_config *cfg, const char *image, long long id, bool reown,
		       long long *owner)
{
	long long want = (long long)cfg->uid_base + id;
	struct stat st;

	if (stat(image, &st) < 0 || !S_ISREG(st.st_mode))
		return log_error("%s: not a regular file", image);
	if (home_attached(image))
		return log_error("%s is mounted: refused", image);
	if (home_fsck(image) < 0)
		return log_error("%s is not a clean ext4 file system (e2fsck -fn): refused", image);
	if ((*owner = image_owner(image)) < 0)
		return -1;
	if (*owner != want && !reown)
		return log_error("%s belongs to host uid %lld, not to this user's %lld (the home of "
				 "another user id): refused; --reown gives its files to this user",
				 image, *owner, want);
	return 0;
}

/* homes/<id>/lock, as home.c takes it around a mount: no start mounts the home
 * while it is swapped. The locked fd, or -1. */
static int lock_home(const char *state, const char *key)
{
	char path[BACKUP_PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/homes/%s", state, key);
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return log_errno("mkdir %s", path);
	snprintf(path, sizeof(path), "%s/homes/%s/lock", state, key);
	if ((fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
		return log_errno("open %s", path);
	if (flock(fd, LOCK_EX) < 0) {
		close(fd);
		return log_errno("lock %s", path);
	}
	return fd;
}

/* The copy made beside the image, then the image moved to the archive and the
 * copy renamed into its place. */
static int swap_image(const char *state, const char *name, long long id, const char *from,
		      uid_t owner, uid_t want)
{
	char image[BACKUP_PATH_MAX], tmp[BACKUP_PATH_MAX + 16], aside[BACKUP_PATH_MAX];

	snprintf(image, sizeof(image), "%s/homes/%lld.img", state, id);
	snprintf(tmp, sizeof(tmp), "%s.restoring", image);
	snprintf(aside, sizeof(aside), "%s/archive/%lld-%s-%lld.img", state, id, name,
		 (long long)time(NULL));
	unlink(tmp); /* a failed restore's leftover */
	if (backup_copy_file(from, tmp) < 0)
		return -1;
	if (owner != want && (backup_reown(state, tmp, owner, want) < 0 || home_fsck(tmp) < 0)) {
		unlink(tmp);
		return log_error("%s: its files could not be given to uid %u", from, (unsigned)want);
	}
	if (access(image, F_OK) == 0) {
		if (link(image, aside) < 0) {
			unlink(tmp);
			return log_errno("keep %s as %s", image, aside);
		}
		/* archive_retention counts from now, not from the image's last write */
		utimensat(AT_FDCWD, aside, NULL, AT_SYMLINK_NOFOLLOW);
		printf("the image it replaces is kept as %s\n", aside);
	}
	if (rename(tmp, image) < 0) {
		unlink(tmp);
		return log_errno("rename %s", tmp);
	}
	return 0;
}

static int cmd_restore_home(const struct labd_config *cfg, const char *name, const char *from,
			    bool reown)
{
	const char *state = cfg->state_dir;
	char store[BACKUP_PATH_MAX], key[HOME_KEY_MAX], image[BACKUP_PATH_MAX];
	long long id, owner = -1;
	int lock, rc = -1;

	umask(077);
	snprintf(store, sizeof(store), "%s/%s", state, BACKUP_DB);
	if ((rc = backup_db_user_id(store, name, &id)) <= 0)
		return rc < 0 ? -1 : log_error("no user named %s", name);
	snprintf(key, sizeof(key), "%lld", id);
	snprintf(image, sizeof(image), "%s/homes/%s.img", state, key);
	if ((lock = lock_home(state, key)) < 0)
		return -1;
	rc = -1;
	if (home_mounted(state, key) || home_attached(image))
		log_error("the home of %s is in use (a runtime, job or warm pool of theirs "
			  "runs): stop them first", name);
	else if (check_image(cfg, from, id, reown, &owner) == 0 &&
		 swap_image(state, name, id, from, (uid_t)owner, (uid_t)(cfg->uid_base + id)) == 0)
		rc = 0;
	close(lock);
	if (rc == 0)
		printf("restored the home of %s (user id %lld) from %s\n", name, id, from);
	return rc;
}

int backup_restore_home(const struct labd_config *cfg, int argc, char **argv)
{
	const char *name = NULL, *from = NULL;
	bool reown = false;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--from") == 0 && i + 1 < argc)
			from = argv[++i];
		else if (strcmp(argv[i], "--reown") == 0)
			reown = true;
		else if (argv[i][0] != '-' && !name)
			name = argv[i];
		else
			return 2;
	}
	if (!name || !from)
		return 2;
	return cmd_restore_home(cfg, name, from, reown) < 0 ? 1 : 0;
}
