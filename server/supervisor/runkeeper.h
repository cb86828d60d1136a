/* runkeeper.h - a runtime's keeper (keeper.h): Jupyter's output drained into its
 * rotated jupyter.log by a process that outlives the supervisor.
 *
 * The supervisor starts it once the sandbox runs and then holds no end of the
 * output pipe; on re-adoption a runtime whose keeper no longer answers (started
 * by a release before keepers, whose supervisor was the pipe's only reader, or
 * a keeper that died) gets a new one on the pipe's read end, opened again through
 * /proc from a process in the sandbox that writes to it. */
#ifndef LABD_RUNKEEPER_H
#define LABD_RUNKEEPER_H

#include <sys/types.h>

#include "labd/sandbox.h"

struct labd_config;

/* Starts the keeper of the runtime h of user on out_fd (the caller keeps and
 * closes it); *pid its pid.  0 or -errno (logged, with the step). */
int runkeeper_start(const struct labd_config *cfg, const char *state_dir, const char *user,
		    const struct sandbox_handle *h, int out_fd, pid_t *pid);
/* 1: the keeper answers; 0: it did not and a new one drains the pipe again
 * (*pid set); -errno when neither (logged: new kernels of this runtime fail until
 * it restarts). */
int runkeeper_repair(const struct labd_config *cfg, const char *state_dir, const char *user,
		     const struct sandbox_handle *h, pid_t *pid);
/* The sandbox ended: what its pipe still held goes to the log (the teardown
 * kills the keeper with the cgroup), and the socket goes. */
void runkeeper_end(const char *state_dir, const char *sandbox_id);
/* The fd that reads the output pipe fd 1 of pid writes to, opened again (a pipe
 * only, never a file the path would name now); -errno. */
int runkeeper_reopen(pid_t pid);

#endif
