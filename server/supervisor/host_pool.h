/* host_pool.h - the job pool purpose of the sandbox host (host.h, docs/jobs.md):
 * sandboxes keyed by (user, pool_id), several per user beside the runtime, whose
 * command is the job agent; their GPUs held exclusively like a runtime's, killed
 * at their deadline whatever runs, and running one job at a time (jobrun.c).
 *
 * Pools a previous supervisor left are found from their records
 * (<state>/pools/<id>/record.json) and taken over where it left them: the
 * agent's pipes come from the pool's keeper, a job in it goes on (a staging or an
 * upload whose worker died is done again). A pool whose sandbox or keeper is
 * gone is ended (cause "gone") and torn down, a job in it lost (the web process
 * retries it as an infrastructure failure); a pool that was ending is ended.
 *
 * Agents' status lines are read, and jobs' ends said, only while a web process
 * listens (host_set_listening): an event with nobody to hear it would be lost, so
 * a job's end waits (J_ENDED, in the record across a restart) and goes out at
 * the next tick after hello. With keep_on_shutdown the pools run on with their
 * keepers; starts, teardowns, stagings and uploads under way finish (host_busy). */
#ifndef LABD_HOST_POOL_H
#define LABD_HOST_POOL_H

#include <jansson.h>

#include "supervisor/host.h"

extern const struct host_purpose host_pool;

/* Request handlers (fields checked against proto.h's lists); each returns the reply. */
json_t *host_pool_start(struct host *h, long long id, json_t *msg);
json_t *host_pool_stop(struct host *h, long long id, json_t *msg);
json_t *host_pool_job_run(struct host *h, long long id, json_t *msg);
json_t *host_pool_job_stop(struct host *h, long long id, json_t *msg);
/* job_logs_remove: unlinks joblogs/<id>.log of each id but a job a pool
 * holds now (its log is still written or copied). */
json_t *host_pool_logs_remove(struct host *h, long long id, json_t *msg);
/* The shells starting into the pools' jobs (host_shell.h); NULL without pools. */
struct host_shells *host_pool_shells(struct host *h);

#endif
