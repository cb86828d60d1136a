/* homeloop.c - a home's loop device settings; see homeloop.h. */
#include "sandbox/homeloop.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "labd/log.h"

/* The ext4 block size of the image open at fd (1024 << s_log_block_size, at byte 24
 * of the superblock, which starts at byte 1024), or 0 when fd holds no ext4. */
static uint32_t ext4_block_size(int fd)
{
	unsigned char sb[64];
	uint32_t log;

	if (pread(fd, sb, sizeof(sb), 1024) != (ssize_t)sizeof(sb))
		return 0;
	if (sb[0x38] != 0x53 || sb[0x39] != 0xEF) /* s_magic 0xEF53, little-endian */
		return 0;
	log = (uint32_t)sb[0x18] | (uint32_t)sb[0x19] << 8 | (uint32_t)sb[0x1a] << 16 |
	      (uint32_t)sb[0x1b] << 24;
	return log <= 2 ? 1024u << log : 0; /* ext4 on a loop device: 1, 2 or 4 KiB */
}

void home_loop_config(int imgfd, const char *image, struct loop_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->fd = (uint32_t)imgfd;
	/* autoclear: the device detaches itself at the last umount, so a crash between
	 * attach and mount cannot leak it once the fd is closed */
	cfg->info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO;
	/* ext4 never sends a request smaller than its block: a logical block that size
	 * lets the loop device use O_DIRECT on any backing file system whose alignment
	 * is up to one block (4 KiB covers 4Kn disks), where the default of 512 bytes
	 * would fall back to cached I/O there */
	cfg->block_size = ext4_block_size(imgfd);
	snprintf((char *)cfg->info.lo_file_name, sizeof(cfg->info.lo_file_name), "%s", image);
}

int home_loop_config_plain(struct loop_config *cfg)
{
	if (!cfg->block_size && !(cfg->info.lo_flags & LO_FLAGS_DIRECT_IO))
		return -1;
	cfg->block_size = 0;
	cfg->info.lo_flags &= ~(uint32_t)LO_FLAGS_DIRECT_IO;
	return 0;
}

/* The first line of /sys/block/<loopN>/<rel> into buf; 0, or -1. */
static int loop_attr(const char *dev, const char *rel, char *buf, size_t len)
{
	const char *name = strrchr(dev, '/');
	char path[128];
	FILE *f;
	int rc = -1;

	snprintf(path, sizeof(path), "/sys/block/%s/%s", name ? name + 1 : dev, rel);
	if (!(f = fopen(path, "re")))
		return -1;
	if (fgets(buf, (int)len, f)) {
		buf[strcspn(buf, "\n")] = '\0';
		rc = 0;
	}
	fclose(f);
	return rc;
}

void home_loop_report(const char *dev, const char *image)
{
	char dio[8], bs[16];

	if (loop_attr(dev, "loop/dio", dio, sizeof(dio)) < 0)
		snprintf(dio, sizeof(dio), "?");
	if (loop_attr(dev, "queue/logical_block_size", bs, sizeof(bs)) < 0)
		snprintf(bs, sizeof(bs), "?");
	if (strcmp(dio, "0") != 0)
		log_info("home %s on %s: direct I/O %s, %s-byte blocks", image, dev,
			 strcmp(dio, "1") == 0 ? "on" : "unknown", bs);
	else
		log_warn("home %s on %s: no direct I/O (the file system of the image refuses "
			 "O_DIRECT at %s-byte blocks): the home's reads are cached twice",
			 image, dev, bs);
}
