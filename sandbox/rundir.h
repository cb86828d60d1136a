/* rundir.h - the per-sandbox run dir (bound at /run/labd inside): a small tmpfs that
 * root mounts on the host path, owned by the sandbox's host uid.  Jupyter's socket
 * lives there, reachable by the supervisor and labd-web at the same host path; what
 * the user writes there is capped at RUNDIR_BYTES and, being tmpfs pages, charged to
 * the memory cgroup of the process that writes them (the sandbox's), never to the
 * state file system. */
#ifndef LABD_SANDBOX_RUNDIR_H
#define LABD_SANDBOX_RUNDIR_H

#include <stdint.h>
#include <sys/types.h>

#define RUNDIR_BYTES (1u << 20)
#define RUNDIR_INODES 64

/* Creates dir (0700, root) if needed and mounts the tmpfs on it, mode 0700 and owned
 * by uid:uid.  A tmpfs a crashed start left there is unmounted first; any other mount
 * point is refused.  0 or -1 (fail_error says why). */
int rundir_mount(const char *dir, uid_t uid);
/* Unmounts the run dir's tmpfs (every one stacked there), never following a link;
 * nothing to do when dir is no tmpfs mount point.  0 or -1 (errno set). */
int rundir_unmount(const char *dir);

#endif
