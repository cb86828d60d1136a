/* reconcile.h - pool rows against the backend's list (jobs/reconcile.c). */
#ifndef LABD_JOBS_RECONCILE_H
#define LABD_JOBS_RECONCILE_H

#include <stdint.h>

struct app;

/* A pool being built is not missed from the backend's list before this. */
#define JOBS_START_GRACE_S 10

/* Matches pool rows to the backend's list: 0, or -1 when the backend did
 * not answer. */
int jobs_reconcile(struct app *app);

/* Pool id was asked for by this web process (dispatch.c, at each new pool): its
 * start gets the grace above, a start asked before this process's first does not. */
void jobs_reconcile_own_pool(int64_t id);

#endif
