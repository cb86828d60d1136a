/* homeguard.h - one writer per home image, also across machines that share the
 * image's folder ([storage] home_images on the nodes of a cluster).
 *
 * ext4 is not a cluster file system: two machines mounting one image each run their
 * own ext4 on it and corrupt it. Two guards keep a home on one machine at a time:
 *
 * - An open file description (OFD) write lock on the whole image, taken on the very
 *   fd the loop device is configured with. The loop device keeps that open file
 *   description, so the lock lives exactly as long as the device is attached: it
 *   outlives the worker that mounted it and a supervisor restart, and goes with the
 *   home's last unmount (autoclear detach), or with the machine. A second attach
 *   anywhere that honours the lock (this machine, NFSv4 clients of one server) fails
 *   at once: "the home is mounted on another node". Offline growth takes it too.
 * - ext4 multiple-mount protection ([storage] mmp = yes: tune2fs -O mmp before the
 *   first mount): the kernel itself refuses a second mount of a live image (after a
 *   wait of about twice the MMP interval) even where locks do not reach.
 *
 * On one machine two state dirs (two node supervisors, as in the tests) would also
 * find the other's loop device attached; reusing it is right only for this state
 * dir's own mount (home.c's loop_mount): <state>/homes/<key>/loop records the device
 * and its disk sequence number (unique per attach) when this state dir attached it. */
#ifndef LABD_SANDBOX_HOMEGUARD_H
#define LABD_SANDBOX_HOMEGUARD_H

#include <stdbool.h>

/* What a refused mount says (start errors carry it to the user). */
#define HOMEGUARD_ELSEWHERE "the home is mounted on another node"

/* Takes the write lock on imgfd (the image's whole length and beyond) or fails at
 * once with HOMEGUARD_ELSEWHERE (errno EBUSY). 0 or -1. */
int homeguard_lock(int imgfd, const char *image);
/* Records that this state dir attached dev ("/dev/loopN") for the home mounted at
 * mnt; a failure is logged only (the lock still guards). */
void homeguard_note(const char *mnt, const char *dev);
/* Before reusing dev, found attached to image: 0 when it is this state dir's own
 * attach (recorded by homeguard_note) or an unguarded one (no lock: the release
 * before), -1 with HOMEGUARD_ELSEWHERE when another holds it. */
int homeguard_reuse(const char *image, const char *mnt, const char *dev);
/* [storage] mmp: gives image multiple-mount protection (tune2fs -O mmp) unless it
 * has it; only while no loop device here holds it (attached) and no other machine
 * does (the lock, taken for the change). 0, or -1 when the change failed. */
int homeguard_mmp(const char *image, bool attached);
/* Whether image has ext4 multiple-mount protection (its superblock's MMP flag). */
bool homeguard_has_mmp(const char *image);

#endif
