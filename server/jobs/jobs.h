/* jobs.h - training jobs on the web side (docs/jobs.md): submit, stop,
 * release a warm pool, the backend's pool and job events, and the jobs
 * thread that dispatches, runs and expires.
 *
 * Folder rule: jobs/ includes store/, sched/, backend/, config/, metrics/
 * and common/; never runtime/ (its sibling), HTTP or the proxy.
 *
 * Backend events arrive on the backend's thread and may not call the
 * backend: they move rows and poke the jobs thread. Every call to the
 * backend that a row's change calls for (pool_start, job_run, pool_stop of
 * an expired warm pool) is made by the jobs thread, every 250 ms and at once
 * when poked; stop and release are made by the caller (an HTTP worker) as a
 * runtime's stop is. Rows are the truth: after a restart of labd-web the
 * thread reconciles pools with the backend's list before it bills on. */
#ifndef LABD_JOBS_JOBS_H
#define LABD_JOBS_JOBS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "jobs/submit.h"
#include "sched/quota_check.h"
#include "store/jobs.h"
#include "store/pools.h"

struct app;
struct jobs_runner;

#define JOBS_TICK_MS 250
/* A pool being built is not missed from the backend's list before this. */
#define JOBS_START_GRACE_S 10
/* A warm pool is reused only when its deadline leaves the job this much
 * beyond its max_runtime_s and grace (teardown, upload). */
#define JOBS_DEADLINE_SLACK_S 300

/* ---- entry points (jobs.c) ---- */

/* Starts the jobs thread (dispatch, runs, expiry, reconciliation, heartbeat).
 * 0 or -1. The app must outlive jobs_runner_stop. */
int jobs_runner_start(struct app *app, struct jobs_runner **out);
void jobs_runner_stop(struct jobs_runner *r);
/* A pass now (any thread, NULL ignored). */
void jobs_poke(struct jobs_runner *r);
/* A reconciliation with the backend's list, then a pass (any thread). */
void jobs_wake(struct jobs_runner *r);

enum jobs_submit_result {
	JOBS_SUBMIT_OK,         /* *out is the new Pending job */
	JOBS_SUBMIT_INVALID,    /* *err names the field */
	JOBS_SUBMIT_EXISTS,     /* the user has a job of that name */
	JOBS_SUBMIT_CONCURRENT, /* concurrent_jobs reached: *limit */
	JOBS_SUBMIT_QUOTA,      /* a window of the kind is used up: *refusal */
	JOBS_SUBMIT_ERROR,
};

/* A refused submit's details. */
struct jobs_refusal {
	struct jobs_submit_error err;
	struct quota_window window;
	int64_t concurrent_limit;
};

/* Checks body against the user's limits and quota and inserts a Pending
 * job (nothing is made on any refusal); the jobs thread dispatches it at
 * once. On OK *out (release with jobs_row_free). */
enum jobs_submit_result jobs_submit(struct app *app, int64_t user_id, const char *user,
				    const char *address, json_t *body, struct job *out,
				    struct jobs_refusal *why);
/* Stops a live job: Pending ends Stopped at once; otherwise Stopping, and the
 * backend sends SIGTERM, then SIGKILL after grace_s (<= 0: [jobs] grace).
 * 0, -EALREADY when it is not live, or a negative errno. */
int jobs_stop(struct app *app, const struct job *j, int64_t grace_s, const char *actor);
/* Releases an available warm pool now (Terminated with reason). 0,
 * -EBUSY when it is not available (in use or ended), or a negative errno. */
int jobs_release_pool(struct app *app, const struct pool *p, const char *reason);
/* The account was disabled: its live jobs are stopped now (a grace of 1 s)
 * and its warm pools released, with reason. 0, or a negative errno (logged). */
int jobs_end_account(struct app *app, int64_t user_id, const char *reason);
/* The events of job sandboxes, bound to app: sets only the pool and job
 * fields of ev (after runtime_events_init). */
void jobs_events_init(struct backend_events *ev, struct app *app);
/* The channel came up: reconcile pools (web/ calls it from its connected event). */
void jobs_connected(struct app *app);

/* ---- shared within jobs/ ---- */

/* How a job ended (pure, outcome.c): status, secondary status, exit code and
 * the failure reason in plain words (reason, len bytes, also m->message and,
 * for Failed, m->failure) from the backend's exit and the job (a Stopping job
 * ends Stopped whatever the exit). memory_bytes: its sandbox's limit. */
void jobs_outcome(const struct job *j, const struct backend_job_exit *x, int64_t memory_bytes,
		  struct job_move *m, char *reason, size_t len);
/* Wall clock in ms. */
int64_t jobs_now_ms(void);
/* One dispatch pass: Pending jobs onto warm or new pools (dispatch.c). */
void jobs_dispatch(struct app *app);
/* Sends job_run for a job whose pool is ready and that has not been sent (lifecycle.c). */
void jobs_run_ready(struct app *app);
/* Ends available pools past their keep-alive (lifecycle.c). */
void jobs_expire_pools(struct app *app);
/* Fails Pending jobs past max_wait_s (dispatch.c). */
void jobs_expire_waits(struct app *app);
/* Matches pool rows to the backend's list: 0, or -1 when the backend did not
 * answer (reconcile.c). */
int jobs_reconcile(struct app *app);
/* A pool's sandbox is gone while it held job_id (lifecycle.c): infrastructure
 * failure, retried while attempts are left. */
void jobs_pool_lost(struct app *app, const struct pool *p, const char *reason);
/* The spec of contract §3 for job j into a malloc'd JSON text, or NULL (spec.c). */
char *jobs_backend_spec(const struct app *app, const struct job *j);
/* The warm pool job_id left is gone (released, expired, lost): its warm
 * status Terminated with reason, when it was Available. */
void jobs_end_warm(struct app *app, int64_t job_id, const char *reason, int64_t now);
/* After every change of job id's row: its watchers (jobs/watch.h). */
void jobs_changed(struct app *app, int64_t job_id);

#endif
