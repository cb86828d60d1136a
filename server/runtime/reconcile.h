/* reconcile.h - the web process's runtime timers, in one thread: a total
 * reconciliation with the backend when woken (channel up, a call that timed
 * out) and every few minutes as a safety net; starts that Jupyter has not
 * answered within [runtime] start_timeout are failed; runtimes idle for
 * [runtime] idle_timeout (no request, no open WebSocket, no busy kernel) are
 * culled. Readiness and ends arrive as backend events, not from here. Every
 * transition is audited with its reason. */
#ifndef LABD_RECONCILE_H
#define LABD_RECONCILE_H

struct app;
struct reconciler;

/* Starts the thread; 0 or -1. The app must outlive reconcile_stop(). */
int reconcile_start(struct app *app, struct reconciler **out);
void reconcile_stop(struct reconciler *rc);
/* Asks for a total reconciliation now (safe from any thread, NULL ignored). */
void reconcile_wake(struct reconciler *rc);
/* Asks for one pass of the timers and the GPU queue now, without a total
 * reconciliation (safe from any thread, the backend's included; NULL ignored). */
void reconcile_poke(struct reconciler *rc);
/* One pass of the timers (start timeout, idle culling), exposed for tests. */
void reconcile_timers(struct app *app);

#endif
