/* homes.c - see homes.h. */
#include "supervisor/homes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "labd/log.h"

void homes_dir(const struct labd_config *cfg, const char *state_dir, char *out, size_t len)
{
	if (cfg && cfg->home_images[0])
		snprintf(out, len, "%s", cfg->home_images);
	else
		snprintf(out, len, "%s/homes", state_dir);
}

void homes_image_path(const struct labd_config *cfg, const char *state_dir, long long user_id,
		      char *out, size_t len)
{
	char dir[CONFIG_PATH_MAX + 16];

	homes_dir(cfg, state_dir, dir, sizeof(dir));
	snprintf(out, len, "%s/%lld.img", dir, user_id);
}

static int open_path(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? log_errno("open %s", path) : fd;
}

static int open_homes(const struct labd_config *cfg, const char *state_dir)
{
	char path[CONFIG_PATH_MAX + 16];

	homes_dir(cfg, state_dir, path, sizeof(path));
	return open_path(path);
}

/* Archived images stay beside the live ones (a rename, never a copy): <state>/archive,
 * or <home_images>/archive (made here) when the images live elsewhere. */
static int open_archive(const struct labd_config *cfg, const char *state_dir)
{
	char path[CONFIG_PATH_MAX + 16];

	if (cfg && cfg->home_images[0]) {
		snprintf(path, sizeof(path), "%s/archive", cfg->home_images);
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			return log_errno("mkdir %s", path);
	} else {
		snprintf(path, sizeof(path), "%s/archive", state_dir);
	}
	return open_path(path);
}

/* Whether name under dfd is a regular file (not a link, not a directory). */
static int regular_at(int dfd, const char *name)
{
	struct stat st;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	return S_ISREG(st.st_mode) ? 1 : -EINVAL;
}

int homes_adopt_named(const struct labd_config *cfg, const char *state_dir, const char *user,
		      long long user_id)
{
	char by_id[32], by_name[64];
	int dfd = open_homes(cfg, state_dir), rc = 0;

	if (dfd < 0)
		return -EIO;
	snprintf(by_id, sizeof(by_id), "%lld.img", user_id);
	snprintf(by_name, sizeof(by_name), "%s.img", user);
	if (regular_at(dfd, by_id) == 0 && regular_at(dfd, by_name) == 1) {
		if (renameat(dfd, by_name, dfd, by_id) < 0)
			rc = log_errno("move homes/%s to homes/%s", by_name, by_id);
		else
			log_info("home of %s moved to homes/%s (homes are keyed on user ids)", user,
				 by_id);
	}
	close(dfd);
	return rc < 0 ? -EIO : 0;
}

/* The image of a deleted user: by id, or by name if it never moved. */
static int retire_one(const struct labd_config *cfg, int hfd, int afd, const char *image,
		      const char *user, long long user_id)
{
	char archived[128];
	int rc;

	if (strcmp(cfg->deleted_home, "remove") == 0) {
		if ((rc = unlinkat(hfd, image, 0)) == 0)
			log_info("home of deleted user %s (id %lld) removed", user, user_id);
		return rc < 0 ? log_errno("remove homes/%s", image) : 0;
	}
	snprintf(archived, sizeof(archived), "%lld-%s-%lld.img", user_id, user, (long long)time(NULL));
	if (renameat(hfd, image, afd, archived) < 0)
		return log_errno("archive homes/%s", image);
	/* the sweep's clock starts now, not at the image's last write */
	utimensat(afd, archived, NULL, AT_SYMLINK_NOFOLLOW);
	log_info("home of deleted user %s (id %lld) archived to archive/%s", user, user_id, archived);
	return 0;
}

int homes_retire(const struct labd_config *cfg, const char *state_dir, const char *user,
		 long long user_id)
{
	char by_id[32], by_name[64];
	int hfd = open_homes(cfg, state_dir), afd = open_archive(cfg, state_dir), rc = 0;

	if (hfd < 0 || afd < 0) {
		rc = -EIO;
		goto out;
	}
	snprintf(by_id, sizeof(by_id), "%lld.img", user_id);
	snprintf(by_name, sizeof(by_name), "%s.img", user);
	if (regular_at(hfd, by_id) == 1)
		rc = retire_one(cfg, hfd, afd, by_id, user, user_id);
	else if (regular_at(hfd, by_name) == 1)
		rc = retire_one(cfg, hfd, afd, by_name, user, user_id);
out:
	if (hfd >= 0)
		close(hfd);
	if (afd >= 0)
		close(afd);
	return rc < 0 ? -EIO : 0;
}

int homes_sweep(const struct labd_config *cfg, const char *state_dir, int64_t retention_s,
		int64_t now_s)
{
	int afd = open_archive(cfg, state_dir), removed = 0;
	struct dirent *e;
	struct stat st;
	DIR *d;

	if (afd < 0 || !(d = fdopendir(afd))) {
		if (afd >= 0)
			close(afd);
		return -EIO;
	}
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode) || st.st_mtime + retention_s > now_s)
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) == 0) {
			log_info("archived home %s is past archive_retention: removed", e->d_name);
			removed++;
		}
	}
	closedir(d);
	return removed;
}
