/* jobs.h - training jobs on the web side (docs/jobs.md): the entry points
 * (submit, stop, an account's end; jobs.c), and the folder's public face for
 * web/ and api/ (the runner, the release of a warm pool, the events).
 * Inside jobs/ no file but jobs.c includes it; top to bottom (no file
 * includes one above it): jobs.c; runner.c (the pass on a ticker);
 * retention.c (stored bytes, deletion, the retention sweep: retention.h);
 * dispatch.c, lifecycle.c, reconcile.c; moves.c (the shared row moves and
 * the one "row moved" hook); poke.c (the runner's handle).
 *
 * Folder rule: jobs/ includes store/, sched/, backend/, config/, metrics/
 * and common/; never runtime/ (its sibling), HTTP or the proxy.
 *
 * Backend events arrive on the backend's thread and may not call the
 * backend: they move rows and poke the jobs pass. Every call to the
 * backend that a row's change calls for (pool_start, job_run, pool_stop of
 * an expired warm pool) is made by the jobs pass (runner.h), when due and at
 * once when poked; stop and release are made by the caller (an HTTP worker) as a
 * runtime's stop is. Rows are the truth: after a restart of labd-web the
 * pass reconciles pools with the backend's list before it bills on. */
#ifndef LABD_JOBS_JOBS_H
#define LABD_JOBS_JOBS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "jobs/lifecycle.h"
#include "jobs/moves.h"
#include "jobs/outcome.h"
#include "jobs/poke.h"
#include "jobs/retention.h"
#include "jobs/runner.h"
#include "jobs/submit.h"
#include "sched/quota_check.h"
#include "store/jobs.h"
#include "store/pools.h"

struct app;

/* ---- entry points (jobs.c) ---- */

enum jobs_submit_result {
	JOBS_SUBMIT_OK,         /* *out is the new Pending job */
	JOBS_SUBMIT_INVALID,    /* *err names the field */
	JOBS_SUBMIT_EXISTS,     /* the user has a job of that name */
	JOBS_SUBMIT_CONCURRENT, /* concurrent_jobs reached: *limit */
	JOBS_SUBMIT_QUOTA,      /* a window of the kind is used up: *refusal */
	JOBS_SUBMIT_STORAGE,    /* job_storage_bytes reached: storage_limit */
	JOBS_SUBMIT_ERROR,
};

/* A refused submit's details. */
struct jobs_refusal {
	struct jobs_submit_error err;
	struct quota_window window;
	int64_t concurrent_limit;
	int64_t storage_limit; /* job_storage_bytes */
};

/* Checks body against the user's limits and quota and inserts a Pending
 * job (nothing is made on any refusal); the jobs pass dispatches it at
 * once. On OK *out (release with jobs_row_free). */
enum jobs_submit_result jobs_submit(struct app *app, int64_t user_id, const char *user,
				    const char *address, json_t *body, struct job *out,
				    struct jobs_refusal *why);
/* Checks body as jobs_submit does (fields, limits, quota windows) and makes
 * nothing: JOBS_SUBMIT_OK, _INVALID, _QUOTA or _ERROR with *why. */
enum jobs_submit_result jobs_submit_validate(struct app *app, int64_t user_id, json_t *body,
					     struct jobs_refusal *why);
/* Stops a live job: Pending ends Stopped at once; otherwise Stopping, and the
 * backend sends SIGTERM, then SIGKILL after grace_s (<= 0: [jobs] grace).
 * 0, -EALREADY when it is not live, or a negative errno. */
int jobs_stop(struct app *app, const struct job *j, int64_t grace_s, const char *actor);
/* The account was disabled: its live jobs are stopped now (a grace of 1 s)
 * and its warm pools released, with reason. 0, or a negative errno (logged). */
int jobs_end_account(struct app *app, int64_t user_id, const char *reason);
#endif
