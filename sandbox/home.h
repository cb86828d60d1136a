/* home.h - per-user persistent homes: one sparse ext4 image per user, loop-mounted
 * once on the host under <state_dir>/homes/<key>/mnt and bound into each of that
 * user's sandboxes.  <state_dir>/homes/<key> is an unbindable bind of itself while the
 * home is mounted, so no other sandbox's recursive clone of the root takes a copy.  References are files <state_dir>/homes/<key>/refs/<holder>, so
 * they survive a supervisor restart and gc can drop those of dead sandboxes.
 *
 * The key is the user's id (home_key), never the name: a user deleted while a sandbox
 * still holds their home mounted, and a new user of the same name, never share a mount
 * point.  Sandboxes started by the release before mounted by user name; their state
 * files say so (no home_key: the name), and home_key_find finds such a mount for the
 * user-level calls (usage, growth) only when it holds the user's own image. */
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
#define HOME_KEY_MAX 64 /* a key: an id in decimal, or an old record's user name */

/* The key of user_id's home: the id in decimal (into buf). */
void home_key(uint32_t user_id, char *buf, size_t size);
/* The key under which user_id's home is mounted now: home_key, unless only a mount
 * by user name (the release before) holds image; home_key when none is. */
void home_key_find(const char *state_dir, uint32_t user_id, const char *user,
		   const char *image, char *key, size_t size);
/* Mount point of the home keyed key: <state_dir>/homes/<key>/mnt (into buf). */
int home_mount_path(const char *state_dir, const char *key, char *buf, size_t size);
/* dir becomes an unbindable bind of itself (kept when it already is one), so no other
 * sandbox's recursive clone of the root takes along what is mounted inside: a home's
 * directory, or a scratch home's (homescratch.h). 0, or -1 with a failure message. */
int home_seal_dir(const char *dir);
/* Mounts the image (loop, ext4, nodev,nosuid) at key's mount point if not yet
 * mounted and adds holder's reference; 0 or -1.  holder is a single path component
 * (the sandbox id).  A mount point that holds another image is refused while
 * referenced (else unmounted first): one mount never serves two images. */
int home_mount_ref(const char *state_dir, const char *key, const char *image, const char *holder);
/* Drops holder's reference; unmounts (loop device auto-detached) when none is left. */
int home_unref(const char *state_dir, const char *key, const char *holder);
/* Drops references whose holder is_live() says are gone, unmounting unused homes.
 * Returns how many references were dropped, or -1. */
int home_gc(const char *state_dir, bool (*is_live)(const char *holder, void *arg), void *arg);
/* Grows the image to new_size_bytes, online if mounted (LOOP_SET_CAPACITY +
 * resize2fs), offline otherwise.  Shrinking is refused.  0 or -1. */
int home_grow(const char *state_dir, const char *key, const char *image, uint64_t new_size_bytes);
/* Whether a loop device still has image attached (mounted here, or a copy of
 * the mount lives on in another sandbox's namespace): its file system is live
 * and must never be resized offline. */
bool home_attached(const char *image);
/* Whether the home keyed key is mounted at its host mount point (then it is attached
 * too): two stat() calls, where home_attached reads every loop device's sysfs. */
bool home_mounted(const char *state_dir, const char *key);
/* Usage of the mounted home (statfs), or of the image alone when not mounted. */
int home_usage(const char *state_dir, const char *key, const char *image, struct home_usage *u);
/* Runs e2fsck -fn on an unmounted image; 0 when clean, -1 otherwise. */
int home_fsck(const char *image);
/* For homeguard.c: a host helper by absolute path with a clean environment (its exit
 * status, or -1), and the absolute path of one (static buffer). */
int home_run_helper(const char *const argv[]);
const char *home_tool(const char *name);

#endif
