/* monitor.h - the web process's runtime watcher. Once a second it reconciles
 * the runtimes table with the supervisor's sandboxes: marks a runtime running
 * when Jupyter answers api/status, records how and why each one ended,
 * fails starts that take longer than [runtime] start_timeout, and culls
 * runtimes idle for [runtime] idle_timeout (no request, no open WebSocket, no
 * busy kernel). Every transition is audited with its reason. */
#ifndef LABD_RECONCILE_H
#define LABD_RECONCILE_H

struct app;
struct reconciler;

/* Starts the thread; 0 or -1. The app must outlive reconcile_stop(). */
int reconcile_start(struct app *app, struct reconciler **out);
void reconcile_stop(struct reconciler *m);
/* One reconciliation pass (what the thread runs each second, or every
 * 100 ms while a runtime is starting). Returns how many are starting. */
int reconcile_pass(struct app *app);

#endif
