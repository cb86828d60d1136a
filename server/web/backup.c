/* backup.c - `labd backup DIR` and `labd backup --verify DIR`; see backup.h.
 *
 * A backup is a folder laid out as the state dir it came from (db/labd.db,
 * uids.json, homes/<id>.img, joblogs/<id>.log), root's and 0700, with a manifest
 * written last: a folder without one is a backup that did not finish. */
#include "web/backup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "backend/slurmlogs.h"
#include "config/config.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "sandbox/home.h"
#include "web/backup_int.h"

#define FREEZE_MAX_S_DEFAULT 60
#define COPY_TRIES 3

struct backup {
	const struct labd_config *cfg;
	const char *dir;
	unsigned freeze_max_s;
	json_t *files; /* [{"path", "size", "sha256"}] */
};

/* dir must be new, or an empty folder: a backup never mixes with another. */
static int make_empty_dir(const char *dir)
{
	int rc = backup_new_dir(dir, 0700);

	if (rc == -ENOTEMPTY)
		return log_error("%s is not empty: refused (give a new or empty folder)", dir);
	if (rc < 0)
		return -1;
	return chmod(dir, 0700) < 0 ? log_errno("chmod %s", dir) : 0;
}

/* Records dir/rel in the manifest with its size and checksum. */
static int add_file(struct backup *b, const char *rel)
{
	char path[BACKUP_PATH_MAX], hex[65];
	uint64_t size;
	int fd, rc;

	snprintf(path, sizeof(path), "%s/%s", b->dir, rel);
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return log_errno("open %s", path);
	rc = backup_sha256_fd(fd, hex, &size);
	close(fd);
	if (rc < 0)
		return log_error("checksum of %s: %s", path, strerror(-rc));
	json_array_append_new(b->files, json_pack("{s:s,s:I,s:s}", "path", rel, "size",
						  (json_int_t)size, "sha256", hex));
	printf("%s %llu bytes\n", rel, (unsigned long long)size);
	return 0;
}

static bool same_file_state(const struct stat *a, const struct stat *b)
{
	return a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
	       a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Whether the file system mounted at mnt is image's loop device: only then is
 * freezing it freezing image (a mount point can hold an image archived since). */
static bool mount_is_image(const char *mnt, const char *image)
{
	char path[96], backing[BACKUP_PATH_MAX], want[PATH_MAX];
	struct stat st;
	FILE *f;
	bool same = false;

	if (stat(mnt, &st) < 0 || !realpath(image, want))
		return false;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/loop/backing_file", major(st.st_dev),
		 minor(st.st_dev));
	if (!(f = fopen(path, "re")))
		return false;
	if (fgets(backing, sizeof(backing), f)) {
		backing[strcspn(backing, "\n")] = '\0';
		same = strcmp(backing, want) == 0;
	}
	fclose(f);
	return same;
}

/* One home image. Mounted: copied frozen. Not mounted: copied as it is, and
 * copied again if a start mounted it (or a growth changed it) meanwhile. */
static int copy_home(struct backup *b, const char *key, const char *image, const char *dst)
{
	const char *state = b->cfg->state_dir;
	struct stat before, after;

	for (int i = 0; i < COPY_TRIES; i++) {
		char mnt[BACKUP_PATH_MAX];
		home_mount_path(state, key, mnt, sizeof(mnt));
		if (home_mounted(state, key) && mount_is_image(mnt, image))
			return backup_copy_frozen(mnt, image, dst, b->freeze_max_s) < 0 ? -1 : 0;
		if (home_attached(image))
			return log_error("%s is in use but not mounted at homes/%s/mnt (a sandbox of "
					 "an earlier release?): restart it and back up again",
					 image, key);
		if (stat(image, &before) < 0)
			return log_errno("stat %s", image);
		if (backup_copy_file(image, dst) < 0)
			return -1;
		if (stat(image, &after) == 0 && same_file_state(&before, &after) &&
		    !home_attached(image))
			return 0;
		unlink(dst);
		log_info("backup: %s changed during its copy: copying it again", image);
	}
	return log_error("%s kept changing during %d copies", image, COPY_TRIES);
}

/* Whether name is "<key><suffix>", the key a user id (or, for homes, a user name:
 * a home of the old layout, moved to its id at the user's next start); the key
 * into key. */
static bool key_name(const char *name, const char *suffix, bool names_too, char *key, size_t len)
{
	size_t n = strlen(name), s = strlen(suffix);

	if (n <= s || n - s >= len || strcmp(name + n - s, suffix) != 0)
		return false;
	snprintf(key, len, "%.*s", (int)(n - s), name);
	return strspn(key, "0123456789") == n - s || (names_too && parse_user_name_ok(key));
}

/* Every <key><suffix> regular file of the state dir's folder sub. */
static int copy_folder(struct backup *b, const char *sub, const char *suffix, bool homes)
{
	char src[BACKUP_PATH_MAX], dst[BACKUP_PATH_MAX], rel[256], key[HOME_KEY_MAX];
	struct dirent *e;
	struct stat st;
	int rc = 0;
	DIR *d;

	snprintf(dst, sizeof(dst), "%s/%s", b->dir, sub);
	if (mkdir(dst, 0700) < 0 && errno != EEXIST) /* there: an earlier suffix's pass */
		return log_errno("mkdir %s", dst);
	snprintf(src, sizeof(src), "%s/%s", b->cfg->state_dir, sub);
	if (!(d = opendir(src)))
		return errno == ENOENT ? 0 : log_errno("open %s", src);
	while (rc == 0 && (e = readdir(d))) {
		if (!key_name(e->d_name, suffix, homes, key, sizeof(key)))
			continue;
		snprintf(src, sizeof(src), "%s/%s/%s", b->cfg->state_dir, sub, e->d_name);
		if (lstat(src, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (snprintf(rel, sizeof(rel), "%s/%s", sub, e->d_name) >= (int)sizeof(rel))
			continue; /* not a name of the layout's (key_name) */
		snprintf(dst, sizeof(dst), "%s/%s", b->dir, rel);
		rc = homes ? copy_home(b, key, src, dst) : backup_copy_file(src, dst);
		if (rc == 0)
			rc = add_file(b, rel);
	}
	closedir(d);
	return rc;
}

/* The job logs, and a Slurm head's offsets beside them (docs/slurm.md "Job logs")
 * copied first: an offset is then never past the copied log's end, so a restored
 * head goes on pulling from it and loses no line (one pulled meanwhile may be in the
 * log twice). */
static int copy_joblogs(struct backup *b)
{
	return copy_folder(b, "joblogs", ".log" SLURMLOGS_OFFSETS, false) < 0 ||
			       copy_folder(b, "joblogs", ".log" SLURMLOGS_NODES, false) < 0 ||
			       copy_folder(b, "joblogs", ".log", false) < 0
		       ? -1
		       : 0;
}

static int copy_store(struct backup *b, int *schema)
{
	char src[BACKUP_PATH_MAX], dst[BACKUP_PATH_MAX];

	snprintf(dst, sizeof(dst), "%s/db", b->dir);
	if (mkdir(dst, 0700) < 0)
		return log_errno("mkdir %s", dst);
	snprintf(src, sizeof(src), "%s/%s", b->cfg->state_dir, BACKUP_DB);
	snprintf(dst, sizeof(dst), "%s/%s", b->dir, BACKUP_DB);
	if (backup_db_copy(src, dst, schema) < 0)
		return -1;
	return add_file(b, BACKUP_DB);
}

static int copy_uids(struct backup *b)
{
	char src[BACKUP_PATH_MAX], dst[BACKUP_PATH_MAX];

	snprintf(src, sizeof(src), "%s/uids.json", b->cfg->state_dir);
	snprintf(dst, sizeof(dst), "%s/uids.json", b->dir);
	if (access(src, F_OK) < 0)
		return 0;
	return backup_copy_file(src, dst) < 0 ? -1 : add_file(b, "uids.json");
}

/* name.tmp, synced, renamed over name. */
static int write_atomic(const char *dir, const char *name, const char *text)
{
	char path[BACKUP_PATH_MAX], tmp[BACKUP_PATH_MAX + 8];
	size_t len = strlen(text);
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return log_errno("create %s", tmp);
	if (write(fd, text, len) != (ssize_t)len || fsync(fd) < 0)
		rc = log_errno("write %s", tmp);
	close(fd);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = log_errno("rename %s", tmp);
	return rc;
}

/* SHA256SUMS (for sha256sum -c) and the manifest, last. */
static int write_manifest(struct backup *b, int schema)
{
	char when[32], line[BACKUP_PATH_MAX + 80];
	time_t now = time(NULL);
	struct tm tm;
	size_t i;
	json_t *f, *m;
	char *sums = NULL, *text = NULL;
	size_t sums_len = 0;
	int rc = -1;
	FILE *s = open_memstream(&sums, &sums_len);

	if (!s)
		return log_errno("open_memstream");
	json_array_foreach(b->files, i, f) {
		snprintf(line, sizeof(line), "%s  %s\n", json_string_value(json_object_get(f, "sha256")),
			 json_string_value(json_object_get(f, "path")));
		fputs(line, s);
	}
	fclose(s);
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	m = json_pack("{s:i,s:s,s:i,s:s,s:s,s:O}", "format", BACKUP_FORMAT, "labd_version",
		      LABD_VERSION, "schema_version", schema, "created_at", when, "state_dir",
		      b->cfg->state_dir, "files", b->files);
	text = m ? json_dumps(m, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
	if (sums && text && write_atomic(b->dir, BACKUP_SUMS, sums) == 0 &&
	    write_atomic(b->dir, BACKUP_MANIFEST, text) == 0)
		rc = 0;
	free(sums);
	free(text);
	json_decref(m);
	return rc;
}

static int cmd_backup(const struct labd_config *cfg, const char *dir, unsigned freeze_max_s)
{
	struct backup b = {cfg, dir, freeze_max_s, json_array()};
	int schema = -1, rc = -1;

	umask(077); /* the store holds password hashes, the homes the users' work */
	if (make_empty_dir(dir) < 0)
		goto out;
	if (copy_store(&b, &schema) < 0 || copy_uids(&b) < 0 ||
	    copy_folder(&b, "homes", ".img", true) < 0 ||
	    copy_joblogs(&b) < 0 || write_manifest(&b, schema) < 0)
		goto out;
	printf("backup of %s written to %s (%zu files)\n", cfg->state_dir, dir,
	       json_array_size(b.files));
	rc = 0;
out:
	if (rc < 0)
		log_error("backup failed: %s holds no usable backup (it has no %s)", dir,
			  BACKUP_MANIFEST);
	json_decref(b.files);
	return rc;
}

static int cmd_verify(const char *dir)
{
	json_t *m = NULL;
	int rc = backup_verify(dir, &m);

	if (rc == 0)
		printf("backup %s: %zu files, every checksum matches\n", dir,
		       json_array_size(json_object_get(m, "files")));
	json_decref(m);
	return rc;
}

static int usage(void)
{
	fprintf(stderr, "usage: labd [--config FILE] backup [--freeze-max SECONDS] DIR\n"
			"       labd [--config FILE] backup --verify DIR\n"
			"       labd [--config FILE] restore DIR --state-dir NEW\n"
			"       labd [--config FILE] restore-home USER --from IMAGE [--reown]\n");
	return 2;
}

static int cli_backup(const struct labd_config *cfg, int argc, char **argv)
{
	unsigned freeze_max_s = FREEZE_MAX_S_DEFAULT;
	const char *dir = NULL;
	bool verify = false;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--verify") == 0)
			verify = true;
		else if (strcmp(argv[i], "--freeze-max") == 0 && i + 1 < argc) {
			char *end;
			unsigned long v = strtoul(argv[++i], &end, 10);
			if (*end || v == 0 || v > 3600) {
				log_error("--freeze-max: 1 to 3600 seconds");
				return 2;
			}
			freeze_max_s = (unsigned)v;
		} else if (argv[i][0] != '-' && !dir)
			dir = argv[i];
		else
			return 2;
	}
	if (!dir)
		return 2;
	return (verify ? cmd_verify(dir) : cmd_backup(cfg, dir, freeze_max_s)) < 0 ? 1 : 0;
}

bool backup_is_command(const char *word)
{
	return strcmp(word, "backup") == 0 || strcmp(word, "restore") == 0 ||
	       strcmp(word, "restore-home") == 0;
}

int backup_cli(const struct labd_config *cfg, int argc, char **argv)
{
	int rc = 2;

	if (strcmp(argv[0], "backup") == 0)
		rc = cli_backup(cfg, argc, argv);
	else if (strcmp(argv[0], "restore") == 0)
		rc = backup_restore(cfg, argc, argv);
	else if (strcmp(argv[0], "restore-home") == 0)
		rc = backup_restore_home(cfg, argc, argv);
	return rc == 2 ? usage() : rc;
}
