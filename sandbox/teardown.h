/* teardown.h - releasing everything a sandbox's state file records (sandbox_start on
 * failure, sandbox_destroy, sandbox_gc share it). */
#ifndef LABD_SANDBOX_TEARDOWN_H
#define LABD_SANDBOX_TEARDOWN_H

#include "sandbox/state.h"

/* Kills init and its cgroup, removes the cgroup, drops the home reference, removes the
 * run dir (never following a symlink) and the state file.  Idempotent: safe after a
 * partial start or a crash.  0, or -1 when something could not be released. */
int teardown_sandbox(const char *state_dir, const struct sandbox_state *st);

#endif
