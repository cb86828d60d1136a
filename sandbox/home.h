/* home.h - per-user persistent homes: one sparse ext4 image per user, loop-mounted
 * once on the host under <state_dir>/homes/<user>/mnt and bound into each of that
 * user's sandboxes.  References are files <state_dir>/homes/<user>/refs/<holder>, so
 * they survive a supervisor restart and gc can drop those of dead sandboxes. */
#ifndef LABD_HOME_H
#define LABD_HOME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct home_usage {
	uint64_t size_bytes;  /* filesystem size */
	uint64_t used_bytes;  /* size - free */
	uint64_t avail_bytes; /* what the user can still write */
	uint64_t inodes, inodes_free;
	uint64_t image_bytes; /* bytes the sparse image really occupies on the host */
};

/* Creates image (O_EXCL, 0600, sparse, size_bytes) with mkfs.ext4 if it does not exist,
 * root directory owned by owner:owner (the mapped host uid).  Host helpers run with a
 * clean environment.  0 or -1. */
int home_ensure(const char *image, uint64_t size_bytes, uid_t owner);
/* Mount point of user's home: <state_dir>/homes/<user>/mnt (into buf). */
int home_mount_path(const char *state_dir, const char *user, char *buf, size_t size);
/* Mounts the image (loop, ext4, nodev,nosuid) if not yet mounted and adds holder's
 * reference; 0 or -1.  holder is a single path component (the sandbox id). */
int home_mount_ref(const char *state_dir, const char *user, const char *image, const char *holder);
/* Drops holder's reference; unmounts (loop device auto-detached) when none is left. */
int home_unref(const char *state_dir, const char *user, const char *holder);
/* Drops references whose holder is_live() says are gone, unmounting unused homes.
 * Returns how many references were dropped, or -1. */
int home_gc(const char *state_dir, bool (*is_live)(const char *holder, void *arg), void *arg);
/* Grows the image to new_size_bytes, online if mounted (LOOP_SET_CAPACITY +
 * resize2fs), offline otherwise.  Shrinking is refused.  0 or -1. */
int home_grow(const char *state_dir, const char *user, const char *image, uint64_t new_size_bytes);
/* Whether a loop device still has image attached (mounted here, or a copy of
 * the mount lives on in another sandbox's namespace): its file system is live
 * and must never be resized offline. */
bool home_attached(const char *image);
/* Whether the user's home is mounted at its host mount point (then it is attached
 * too): two stat() calls, where home_attached reads every loop device's sysfs. */
bool home_mounted(const char *state_dir, const char *user);
/* Usage of the mounted home (statfs), or of the image alone when not mounted. */
int home_usage(const char *state_dir, const char *user, const char *image, struct home_usage *u);
/* Runs e2fsck -fn on an unmounted image; 0 when clean, -1 otherwise. */
int home_fsck(const char *image);

#endif
