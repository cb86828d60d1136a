/* moves.h - the row moves that the entry points, the backend's events and
 * the jobs pass share: the one "row moved" hook (jobs_changed), the end of a
 * warm pool's keep-alive, the release of an available pool. It includes
 * nothing else of jobs/ but watch.h (whose registry the hook tells) and
 * poke.h. */
#ifndef LABD_JOBS_MOVES_H
#define LABD_JOBS_MOVES_H

#include <stdint.h>

#include "store/jobs.h"
#include "store/pools.h"

struct app;

/* A warm pool is reused only when its deadline leaves the job this much
 * beyond its max_runtime_s and grace (teardown, upload). */
#define JOBS_DEADLINE_SLACK_S 300

/* After every change of job id's row: its watchers (jobs/watch.h) are told
 * and the jobs pass poked (what is due changed). */
void jobs_changed(struct app *app, int64_t job_id);
/* The warm pool job_id left is gone (released, expired, lost): its warm
 * status Terminated with reason, when it was Available. */
void jobs_end_warm(struct app *app, int64_t job_id, const char *reason, int64_t now);
/* Releases an available warm pool now (Terminated with reason). 0,
 * -EBUSY when it is not available (in use or ended), or a negative errno. */
int jobs_release_pool(struct app *app, const struct pool *p, const char *reason);

#endif
