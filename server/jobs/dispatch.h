/* dispatch.h - waiting jobs onto pools (dispatch.c). */
#ifndef LABD_JOBS_DISPATCH_H
#define LABD_JOBS_DISPATCH_H

struct app;
struct jobs_live;

/* One dispatch pass over the pass's live set: Pending jobs onto warm or new pools. */
void jobs_dispatch(struct app *app, const struct jobs_live *live);
/* Fails Pending jobs past max_wait_s (read from the store: all of them, not
 * only the pass's live set). */
void jobs_expire_waits(struct app *app);

#endif
