/* poke.h - the handle every part of jobs/ (and web/) asks the jobs pass with
 * (runner.c runs it on a ticker). It sits below the moves, the lifecycle,
 * dispatch and the runner, so none of them includes the file that owns the
 * thread: no include cycle in the folder. */
#ifndef LABD_JOBS_POKE_H
#define LABD_JOBS_POKE_H

#include <stdbool.h>

struct app;
struct ticker;

/* app->jobs. Filled by jobs_runner_start; read from any thread. */
struct jobs_runner {
	struct ticker *ticker; /* set once, after the first pass may have run (atomic) */
	bool wanted;           /* a reconciliation with the backend's list is asked for (atomic) */
};

/* A pass now (any thread; nothing while app->jobs is not set, which is read
 * atomically: it is set and cleared while other threads run). */
void jobs_poke(struct app *app);
/* A reconciliation with the backend's list, then a pass (any thread). */
void jobs_wake(struct app *app);
/* Whether a reconciliation was asked for since the last call (the pass). */
bool jobs_take_wanted(struct jobs_runner *r);

#endif
