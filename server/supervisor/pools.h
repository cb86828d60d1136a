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
 * Pools a previous supervisor left are found from their records: their agent's
 * pipes died with it, so each is ended (cause "gone") and torn down, a job in it
 * lost (the web process retries it as an infrastructure failure). */
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
/* Kills every pool (shutdown without keep_on_shutdown; a pool cannot outlive
 * the supervisor's pipes anyway); pools_live() counts down as they end. */
void pools_stop_all(struct pools *ps, const char *reason);
int pools_live(const struct pools *ps);

int pools_pollfds(struct pools *ps, struct pollfd *fds, int max);
void pools_on_events(struct pools *ps, const struct pollfd *fds, int n);
/* Deadlines, job timers; ms until the next one (-1 none). */
int pools_tick(struct pools *ps);

#endif
