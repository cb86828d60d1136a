/* keeper.h - a root process per sandbox that outlives the supervisor.
 *
 * A sandbox's output must never depend on the supervisor being alive: when labd
 * restarts (an upgrade, Ctrl-C on `make run`), a pipe whose only reader was the old
 * supervisor makes the next write of Jupyter's (a new kernel) or the job agent's
 * fail with EPIPE.  So each sandbox gets a keeper, forked by the supervisor once the
 * sandbox runs: in its own session (no Ctrl-C reaches it), in the sandbox's cgroups
 * (charged to the user, gone with them), oom_score_adj -1000, in the host's
 * namespaces (the user's code cannot see or signal it).  It
 *   - drains the sandbox's output pipe into a capped log: a runtime's
 *     jupyter.log (rotated at the cap, as runlog.c does), or the current job's log
 *     (one marker line at the cap, then discarded), set per job by keeper_set_log;
 *   - holds fds that must outlive the supervisor (a pool's pipes to its agent) and
 *     hands copies back to root (SCM_RIGHTS) on request, so the next supervisor
 *     re-adopts the pool where the last one left it;
 *   - exits once every writer of the output pipe is gone (the sandbox ended) and it
 *     has written what the pipe held.
 * It answers on a Unix socket at sock_path (mode 0600, in a root-only folder) and
 * only to peers whose SO_PEERCRED uid is 0 (others get -EPERM).  Each call below
 * opens its own connection, so a supervisor started after a crash talks to the
 * keepers the same way.  Every call returns 0 or a negative errno; -ENOENT /
 * -ECONNREFUSED mean the keeper is gone, -EINVAL a request it refused (nothing
 * changed), -ETIMEDOUT no answer within KEEPER_CALL_TIMEOUT_MS.
 * The wire is keeperwire.h; the process itself keeperproc.c. */
#ifndef LABD_KEEPER_H
#define LABD_KEEPER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define KEEPER_HELD_MAX 4
#define KEEPER_DIR "keepers" /* <state_dir>/keepers/, root's 0700 (statedir.c) */
#define KEEPER_CALL_TIMEOUT_MS 2000 /* a keeper answers from its loop, at once */

struct keeper_spec {
	const char *sock_path; /* created by the keeper; an old one at the path is replaced */
	pid_t cgroup_of;       /* join this process's cgroups (the sandbox's init) */
	int drain_fd;          /* the output pipe's read end (the keeper takes a copy) */
	/* Runtime: the rotated log (runlog.h rules; 0640 root:log_gid).  NULL: output
	 * is discarded until keeper_set_log names a log (a job pool between jobs). */
	const char *log_path;
	uint64_t log_max_bytes;
	gid_t log_gid;
	int held_fds[KEEPER_HELD_MAX]; /* copies kept for keeper_fetch */
	unsigned n_held;
};

/* <state_dir>/keepers/<sandbox_id>.sock: where the keeper of a sandbox answers. */
void keeper_sock_path(const char *state_dir, const char *sandbox_id, char *out, size_t len);
/* Forks the keeper; *pid is its pid (a child of the caller, who reaps it).  The
 * caller keeps its own fds and may close them.  The socket answers when this
 * returns.  Waits for the keeper to be set up, then moves it into the cgroups of
 * cgroup_of (so its own setup is never throttled by the sandbox's CPU quota); on
 * a failure of either the keeper is killed and reaped.  Costs about 0.5 ms on a
 * quiet machine, 12-24 ms on a loaded cgroup v1 host (each v1 move waits for an
 * RCU grace period).  0 or a negative errno (-ENOENT: cgroup_of is gone). */
int keeper_start(const struct keeper_spec *ks, pid_t *pid);
/* Copies of the held fds, in the order given to keeper_start (*n of them, the
 * first max when more are held; the caller owns them, O_CLOEXEC). */
int keeper_fetch(const char *sock_path, int *fds, unsigned max, unsigned *n);
/* From now on output goes to log_fd (appended; the keeper takes a copy), of which
 * written_bytes are already used, capped at max_bytes with one marker line.  What
 * the pipe held before the call is drained into the previous log first.  log_fd -1:
 * discard from now on.  -EINVAL (nothing changed) when log_fd is no regular file
 * or max_bytes is 0. */
int keeper_set_log(const char *sock_path, int log_fd, uint64_t max_bytes, uint64_t written_bytes);
/* Drains what the pipe holds now into the current log and answers with the bytes
 * that log holds (*written, may be NULL).  After the agent's "exited" line, the
 * job's whole output is in its log once this returns. */
int keeper_sync(const char *sock_path, uint64_t *written);
/* Asks the keeper to exit now (its fds closed); for a sandbox torn down while the
 * keeper lived on (a writer leaked out of the sandbox). */
int keeper_stop(const char *sock_path);

#endif
