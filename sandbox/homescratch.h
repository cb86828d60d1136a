/* homescratch.h - a scratch home (sandbox_spec.scratch_home): a tmpfs owned by the
 * user at <state_dir>/scratch/<id>/mnt, bound at /home/<user> like an image's mount
 * and removed with the sandbox.  <state_dir>/scratch/<id> is an unbindable bind of
 * itself, as a home's directory is (home.h), so no other sandbox's recursive clone of
 * the root takes a copy.  Its pages are charged to the memory cgroup of whoever writes
 * them: the sandbox's.  Internal to sandbox/. */
#ifndef LABD_SANDBOX_HOMESCRATCH_H
#define LABD_SANDBOX_HOMESCRATCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* <state_dir>/scratch/<id>/mnt into buf; 0 or -1 when it does not fit. */
int homescratch_path(const char *state_dir, const char *id, char *buf, size_t size);
/* Mounts sandbox id's scratch home (size_bytes, mode 0700, owned by owner).  0 or -1
 * (fail.h); on failure nothing is left. */
int homescratch_make(const char *state_dir, const char *id, uint64_t size_bytes, uid_t owner);
/* Unmounts and removes it (nothing when there is none).  0 or -1 (logged). */
int homescratch_remove(const char *state_dir, const char *id);

#endif
