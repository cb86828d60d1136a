/* pools.h - the supervisor's job pools (docs/jobs.md): sandboxes keyed by
 * (user, pool_id), several per user beside the runtime, whose command is the
 * job agent; built and torn down in forked workers like runtimes, holding their
 * GPUs exclusively against runtimes, ended at their deadline whatever runs, and
 * running one job at a time (jobrun.c). Single-threaded: called only from the
 * supervisor's loop. */
#ifndef LABD_POOLS_H
#define LABD_POOLS_H

#include <jansson.h>
#include <poll.h>
#include <stdbool.h>

#include "supervisor/sandboxes.h"

struct labd_config;
struct pools;

/* sb: the runtimes (uid records, GPU holders); events go to ev like theirs.
 * Pools a previous supervisor left are found from their records and taken over
 * where it left them: the agent's pipes come from the pool's keeper, a job in
 * it goes on (a staging or an upload whose worker died is done again). A pool
 * whose sandbox or keeper is gone is ended (cause "gone") and torn down, a job
 * in it lost (the web process retries it as an infrastructure failure); a pool
 * that was ending is ended. */
struct pools *pools_new(const struct labd_config *cfg, const char *state_dir,
			struct sandboxes *sb, const struct sandboxes_events *ev);
void pools_free(struct pools *ps);

/* Request handlers (fields checked against proto.h's lists); each returns the reply. */
json_t *pools_start(struct pools *ps, long long id, json_t *msg);
json_t *pools_stop(struct pools *ps, long long id, json_t *msg);
json_t *pools_job_run(struct pools *ps, long long id, json_t *msg);
json_t *pools_job_stop(struct pools *ps, long long id, json_t *msg);
/* Appends the pools to a sandbox_list reply's list. */
void pools_list(struct pools *ps, json_t *list);
/* Whether a live pool holds gpu. */
bool pools_gpu_held(const struct pools *ps, unsigned gpu);
/* Kills every pool (shutdown without keep_on_shutdown); pools_live() counts
 * down as they end. */
void pools_stop_all(struct pools *ps, const char *reason);
int pools_live(const struct pools *ps);
/* Shutdown with keep_on_shutdown: the pools run on with their keepers; agents
 * are no longer read (their lines wait for the next supervisor). Starts,
 * teardowns, stagings and uploads under way finish: pools_busy() counts them. */
void pools_keep_all(struct pools *ps);
int pools_busy(const struct pools *ps);
/* A web process said hello (true) or is gone (false). Agents' status lines are
 * read, and jobs' ends said, only while one listens: an event with nobody to
 * hear it would be lost, so a job's end waits (J_ENDED, in the record across a
 * restart) and goes out at the next tick after hello. */
void pools_set_listening(struct pools *ps, bool on);

int pools_pollfds(struct pools *ps, struct pollfd *fds, int max);
void pools_on_events(struct pools *ps, const struct pollfd *fds, int n);
/* Deadlines, job timers; ms until the next one (-1 none). */
int pools_tick(struct pools *ps);

#endif
