/* homeloop.h - how a home's image is attached to its loop device (private to sandbox/).
 *
 * Direct I/O keeps the home's data out of the host's page cache (the home's own ext4
 * caches it once, inside the user's memory limit). The kernel turns it on only when the
 * loop device's logical block size is a multiple of what the backing file system needs
 * for O_DIRECT, and falls back to cached I/O silently otherwise; so the block size is
 * set to the image's ext4 block size and the result is read back from sysfs and logged. */
#ifndef LABD_HOMELOOP_H
#define LABD_HOMELOOP_H

#include <linux/loop.h>

/* Fills cfg (zeroed first) to attach the image open at imgfd, named image:
 * autoclear, direct I/O, logical block size = the image's ext4 block size (none set
 * when the superblock is unreadable: the kernel's default then). */
void home_loop_config(int imgfd, const char *image, struct loop_config *cfg);

/* cfg reduced to the kernel's defaults (no block size, no direct I/O), for a kernel
 * that refused it with EINVAL; 0, or -1 when cfg asked for nothing more already. */
int home_loop_config_plain(struct loop_config *cfg);

/* Logs the attached device dev (/dev/loopN) for image: its block size and whether it
 * does direct I/O (a warning when not: every read of the home is then cached twice). */
void home_loop_report(const char *dev, const char *image);

#endif
