/* lifecycle.h - the backend's pool and job events moving rows, job_run for
 * ready pools, warm keep-alive expiry and the lost-pool path (lifecycle.c). */
#ifndef LABD_JOBS_LIFECYCLE_H
#define LABD_JOBS_LIFECYCLE_H

#include <stdint.h>

#include "backend/backend.h"
#include "store/pools.h"

struct app;
struct jobs_live;

/* The events of job sandboxes, bound to app: sets only the pool and job
 * fields of ev (after runtime_events_init). */
void jobs_events_init(struct backend_events *ev, struct app *app);
/* Sends job_run for each job of the live set whose pool is ready and that
 * has not been sent. */
void jobs_run_ready(struct app *app, const struct jobs_live *live);
/* Ends available pools past their keep-alive; the epoch second the next
 * available pool's keep-alive ends (0: none). */
int64_t jobs_expire_pools(struct app *app);
/* A pool's sandbox is gone while it held job_id: infrastructure failure,
 * retried while attempts are left. */
void jobs_pool_lost(struct app *app, const struct pool *p, const char *reason);
/* Records the job ends a full state disk kept out (held by the job_exited
 * event, in the order they came) once it has room; the runner's pass calls
 * it before its reconciliation. */
void jobs_retry_exits(struct app *app);

#endif
