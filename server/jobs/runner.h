/* runner.h - the jobs pass on a ticker (labd/ticker.h): reconciliation with
 * the backend's list when asked and, while anything is live, every minute;
 * waits past max_wait_s, warm pools past their keep-alive, dispatch,
 * job_run, the logs' metrics and rules, the ledger's heartbeat. The pass
 * reads the live jobs once and returns its next due time: soon while a job
 * writes its log or waits, at the next keep-alive end, deadline or
 * heartbeat otherwise, and, with nothing live, never until poked (a submit,
 * a backend event, a stop). */
#ifndef LABD_JOBS_RUNNER_H
#define LABD_JOBS_RUNNER_H

struct app;
struct jobs_runner;

/* Starts the ticker and sets *out (atomically: it may be app->jobs, read by
 * running threads); 0 or -1. The app must outlive jobs_runner_stop. */
int jobs_runner_start(struct app *app, struct jobs_runner **out);
/* Stops the ticker and frees r (clear app->jobs first). */
void jobs_runner_stop(struct jobs_runner *r);
/* The channel came up: reconcile pools (web/ calls it from its connected event). */
void jobs_connected(struct app *app);

#endif
