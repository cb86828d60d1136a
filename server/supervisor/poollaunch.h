/* poollaunch.h - building a job pool's sandbox off the supervisor's loop: the
 * same limits as a runtime's (launch_fill_limits), the job agent as its
 * command, and its layout dir /opt/ml (docs/jobs.md).
 *
 * The agent (labd-jobagent, bound read-only from labd's own libexec/labd beside the
 * labd binary at /opt/labd/libexec) talks over three pipes: its stdin
 * (commands) and its stdout (status lines), which the supervisor uses and the
 * pool's keeper holds across a supervisor restart, and its stderr (the job's
 * output), which the keeper drains into the job's log. No host file is ever
 * handed to the sandbox. */
#ifndef LABD_POOLLAUNCH_H
#define LABD_POOLLAUNCH_H

#include <sys/types.h>

#include "supervisor/launch.h"

#define POOL_AGENT_INSIDE "/opt/labd/libexec/labd-jobagent"
#define POOL_LIBEXEC_INSIDE "/opt/labd/libexec"
#define POOL_ML_INSIDE "/opt/ml"

/* The supervisor's ends of the agent's pipes (close-on-exec, non-blocking). */
struct pool_pipes {
	int cmd_fd;    /* write: the agent's stdin */
	int status_fd; /* read: the agent's stdout */
	int out_fd;    /* read: the agent's stderr (the job's output), for the keeper */
};

/* <state>/pools/<pool_id> and its ml dir (bound at /opt/ml, read-only). */
void poollaunch_dir(const char *state_dir, long long pool_id, char *out, size_t len);
void poollaunch_ml_dir(const char *state_dir, long long pool_id, char *out, size_t len);
/* <state>/pools/<pool_id>/record.json: what a restarted supervisor takes over. */
void poollaunch_record_path(const char *state_dir, long long pool_id, char *out, size_t len);
/* The host dir holding labd-jobagent: libexec/labd/ beside or one folder above the
 * running labd binary (labd's own folder, never all of libexec/). */
int poollaunch_libexec_dir(char *out, size_t len);
/* Makes the root-owned skeleton of the ml dir (0755 dirs input/config,
 * input/data, model, output, checkpoints: the last four are mount points of the
 * job's home folders). 0 or -errno. */
int poollaunch_make_ml(const char *state_dir, long long pool_id);
/* Forks a worker that builds the pool's sandbox; its result is read with
 * launch_result once *fd is readable. 0 with *pipes filled, or -errno. */
int poollaunch_spawn(const struct labd_config *cfg, const char *state_dir,
		     const struct launch_request *rq, long long pool_id, pid_t *pid, int *fd,
		     struct pool_pipes *pipes);
/* Removes <state>/pools/<pool_id> (after the teardown). */
void poollaunch_remove(const char *state_dir, long long pool_id);

#endif
