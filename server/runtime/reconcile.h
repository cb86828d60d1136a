/* reconcile.h - the web process's runtime timers, one pass on a ticker
 * (labd/ticker.h): a total reconciliation with the backend when asked
 * (channel up, a call that timed out: reconcile_wake in poke.h) and, while a
 * runtime is live, every few minutes as a safety net; starts that Jupyter
 * has not answered within [runtime] start_timeout are failed; runtimes idle
 * for [runtime] idle_timeout (no request, no open WebSocket, no busy kernel)
 * are culled; the GPU queue's pass; the ledger's heartbeat. The pass returns
 * the earliest of those due times and, with nothing live, sleeps until
 * poked. Readiness and ends arrive as backend events, not from here. Every
 * transition is audited with its reason. */
#ifndef LABD_RECONCILE_H
#define LABD_RECONCILE_H

#include <stdint.h>

struct app;
struct reconciler;

/* Runtime id was made by this web process (runtime.c, at each new row): its start
 * gets the reconciliation's grace; a start asked before this process's first does not. */
void reconcile_own_runtime(int64_t id);

/* Starts the ticker and sets *out (atomically: it may be app->reconciler,
 * read by running threads); 0 or -1. The app must outlive reconcile_stop(). */
int reconcile_start(struct app *app, struct reconciler **out);
/* Stops the ticker and frees rc (clear app->reconciler first). */
void reconcile_stop(struct reconciler *rc);

#endif
