/* host_shell.h - a shell into a running job (docs/jobs.md, "A shell into a running
 * job"): job_shell starts one in the job's pool sandbox (sandbox_shell.h) in a forked
 * worker, so the loop never waits on the sandbox, and answers with the pty's master
 * passed beside the reply once the worker reports. The shell lives in the sandbox,
 * as the user, and goes with the job: the agent kills everything of the user's when
 * the command ends, the pool's teardown kills its cgroup, and the supervisor keeps a
 * pidfd of each shell it started and kills one whose job no longer trains (a shell
 * that became the user's only after the agent's kill). A shell into a re-adopted
 * pool needs nothing but the pool's record. */
#ifndef LABD_HOST_SHELL_H
#define LABD_HOST_SHELL_H

#include <jansson.h>
#include <poll.h>
#include <stdbool.h>

struct host;
struct host_shells;

/* Shell starts in flight at once, over every pool; one more is refused (busy). */
#define HOST_SHELL_STARTS_MAX 8
/* Shells the supervisor watches at once (the web process allows 64); one more is
 * ended at its start. */
#define HOST_SHELLS_LIVE_MAX 128

struct host_shells *host_shells_new(void);
void host_shells_free(struct host_shells *hs);

/* The channel's job_shell: NULL (answered when its worker reports), or the refusal:
 * not_found (no such pool), job_not_running (the job is not training there now),
 * busy, shell_failed. */
json_t *host_shell_open(struct host *h, long long id, json_t *msg);
/* The workers' fds, and one of them readable: true when it was theirs. */
int host_shells_pollfds(struct host_shells *hs, struct pollfd *fds, int max);
bool host_shells_on_fd(struct host *h, struct host_shells *hs, int fd);
/* Ends every live shell whose job no longer trains in its pool (the job ended, or
 * its pool); forgets the shells that are gone. When next due (now-based ms), or -1
 * when no shell lives. */
long long host_shells_tick(struct host *h, struct host_shells *hs, long long now);

#endif
