/* homeguard.c - one writer per home image; see homeguard.h. */
#include "sandbox/homeguard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "labd/log.h"
#include "sandbox/fail.h"
#include "sandbox/home.h"

#define PATH_LEN 4096
#define EXT4_INCOMPAT_MMP 0x0100 /* s_feature_incompat, superblock offset 0x60 */

static int refuse(const char *image)
{
	fail_error("home %s: " HOMEGUARD_ELSEWHERE " (its image is locked): refused", image);
	errno = EBUSY;
	return -1;
}

int homeguard_lock(int imgfd, const char *image)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};

	if (fcntl(imgfd, F_OFD_SETLK, &fl) == 0)
		return 0;
	if (errno == EAGAIN || errno == EACCES)
		return refuse(image);
	return fail_errno("lock %s", image);
}

/* Whether someone (any open file description) holds a lock on image. */
static bool locked(const char *image)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
	int fd = open(image, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	bool held;

	if (fd < 0)
		return false;
	held = fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
	close(fd);
	return held;
}

/* <dir of mnt>/loop: the record of this state dir's attach. */
static void record_path(const char *mnt, char *buf, size_t size)
{
	const char *slash = strrchr(mnt, '/');
	snprintf(buf, size, "%.*s/loop", slash ? (int)(slash - mnt) : 0, mnt);
}

/* "<dev> <diskseq>" of the device now, into buf; 0 or -1. */
static int identity(const char *dev, char *buf, size_t size)
{
	char path[128], seq[32] = "";
	const char *name = strrchr(dev, '/');
	FILE *f;

	snprintf(path, sizeof(path), "/sys/block/%s/diskseq", name ? name + 1 : dev);
	if (!(f = fopen(path, "re")))
		return -1;
	if (!fgets(seq, sizeof(seq), f))
		seq[0] = '\0';
	fclose(f);
	seq[strcspn(seq, "\n")] = '\0';
	if (!seq[0])
		return -1;
	snprintf(buf, size, "%s %s\n", dev, seq);
	return 0;
}

void homeguard_note(const char *mnt, const char *dev)
{
	char path[PATH_LEN], id[96];
	FILE *f;

	record_path(mnt, path, sizeof(path));
	if (identity(dev, id, sizeof(id)) < 0 || !(f = fopen(path, "we"))) {
		log_warn("home at %s: attach of %s not recorded", mnt, dev);
		return;
	}
	fputs(id, f);
	if (fclose(f) != 0)
		log_warn("home at %s: attach of %s not recorded", mnt, dev);
}

int homeguard_reuse(const char *image, const char *mnt, const char *dev)
{
	char path[PATH_LEN], want[96], have[96] = "";
	FILE *f;

	if (!locked(image))
		return 0; /* attached without the guard: the release before, on this machine */
	record_path(mnt, path, sizeof(path));
	if ((f = fopen(path, "re"))) {
		if (!fgets(have, sizeof(have), f))
			have[0] = '\0';
		fclose(f);
	}
	if (identity(dev, want, sizeof(want)) == 0 && strcmp(have, want) == 0)
		return 0;
	return refuse(image);
}

bool homeguard_has_mmp(const char *image)
{
	unsigned char sb[4];
	int fd = open(image, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0)
		return false;
	n = pread(fd, sb, sizeof(sb), 1024 + 0x60);
	close(fd);
	return n == (ssize_t)sizeof(sb) &&
	       ((uint32_t)sb[0] | (uint32_t)sb[1] << 8 | (uint32_t)sb[2] << 16 |
		(uint32_t)sb[3] << 24) & EXT4_INCOMPAT_MMP;
}

int homeguard_mmp(const char *image, bool attached)
{
	char tune2fs[64];
	int fd, rc;

	if (homeguard_has_mmp(image))
		return 0;
	if (attached) { /* tune2fs on a mounted file system: never */
		log_info("home %s: multiple-mount protection is added at its next start", image);
		return 0;
	}
	fd = open(image, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return fail_errno("open %s", image);
	if (homeguard_lock(fd, image) < 0) {
		close(fd);
		return -1;
	}
	snprintf(tune2fs, sizeof(tune2fs), "%s", home_tool("tune2fs"));
	const char *argv[] = {tune2fs, "-O", "mmp", image, NULL};
	rc = home_run_helper(argv);
	close(fd); /* the lock goes with it */
	/* refused (an image that wants e2fsck first): the lock still guards, and the
	 * next start tries again */
	if (rc != 0)
		log_warn("home %s: tune2fs -O mmp failed (%d): no multiple-mount protection yet",
			 image, rc);
	return 0;
}
