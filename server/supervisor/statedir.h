/* statedir.h - the directories under the state dir that root works in.
 *
 * Each is created at boot, before the web process exists, and verified
 * without following links (lstat-style: a directory, owned by root, mode as
 * listed); one that is a link or owned by anyone else stops the boot, since
 * root would otherwise remove, kill or mount what the labd user pointed at. */
#ifndef LABD_SUPERVISOR_STATEDIR_H
#define LABD_SUPERVISOR_STATEDIR_H

#include <stdbool.h>
#include <sys/types.h>

/* Creates and verifies homes/, runtimes/, boxes/, sandboxes/ and archive/
 * under state_dir (which privdrop_prepare_state_dir made root's); runtimes/
 * gets group labd_gid. From then on sandbox state files may name paths under
 * state_dir only, or a home image under home_images ([storage]; "" = none).
 * joblogs/ gets joblogs_mode (joblog.h's joblog_dir_mode: 0770 on a Slurm head).
 * 0, or -1 (logged, naming the directory). */
int statedir_prepare(const char *state_dir, const char *home_images, gid_t labd_gid,
		     mode_t joblogs_mode);

/* The supervisor's claim on the state dir, <state>/labd.lock: one labd per state dir,
 * and `labd doctor --fix` repairs only while none runs. statedir_lock returns the
 * lock's fd (held for the process's life), -EBUSY when another labd holds it (logged
 * with its pid) or a negative errno. statedir_lock_holder: the holder's pid, 0 when
 * none, or a negative errno. */
#define STATEDIR_LOCK "labd.lock"
int statedir_lock(const char *state_dir);
pid_t statedir_lock_holder(const char *state_dir);

#endif
