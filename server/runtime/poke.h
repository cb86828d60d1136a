/* poke.h - the handle every part of runtime/ (and web/) asks the runtime
 * reconciler's pass with (reconcile.c runs it on a ticker). It sits below
 * the moves, the GPU queue and the reconciler, so none of them includes the
 * file that owns the thread: no include cycle in the folder. */
#ifndef LABD_RUNTIME_POKE_H
#define LABD_RUNTIME_POKE_H

#include <stdbool.h>

struct app;
struct ticker;

/* app->reconciler. Filled by reconcile_start; read from any thread. */
struct reconciler {
	struct ticker *ticker; /* set once, after the first pass may have run (atomic) */
	bool wanted;           /* a total reconciliation is asked for (atomic) */
};

/* Asks for one pass of the timers and the GPU queue now, without a total
 * reconciliation (safe from any thread, the backend's included; nothing
 * while app->reconciler is not set, which is read atomically: it is set and
 * cleared while other threads run). */
void reconcile_poke(struct app *app);
/* Asks for a total reconciliation now (any thread). */
void reconcile_wake(struct app *app);
/* Whether a total reconciliation was asked for since the last call (the pass). */
bool reconcile_take_wanted(struct reconciler *rc);

#endif
