/* tuner.h - tuning jobs (automatic model tuning; docs/jobs.md "Tuning
 * jobs"): the entry points for api/ (create, stop, the JSON view) and the
 * tuner, the thread that runs every live tuning job's search.
 *
 * A trial is an ordinary training job submitted through jobs_submit as the
 * user, so it passes the same checks, quota windows and concurrent_jobs,
 * runs on a warm pool when one matches, is billed in the ledger, and gets its
 * parameters in /opt/ml/input/config/hyperparameters.json. The tuner's pass
 * (a ticker "tuning", due every TUNER_POLL_MS while a tuning job is live,
 * asleep otherwise, poked by a create or a stop) reads each live tuning job
 * from the store, follows its trials' jobs, judges hyperband's rungs from the
 * jobs' extracted metric points, stops the trials that trail, makes the next
 * trials up to max_parallel, and ends the tuning job when none is left. Rows
 * are the truth: a restarted labd-web's first pass goes on where the last
 * one stopped (a trial whose row was made but whose job's submit was not
 * recorded is found again by its job's name). */
#ifndef LABD_TUNING_TUNER_H
#define LABD_TUNING_TUNER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "jobs/jobs.h"
#include "store/tuning.h"

struct app;

/* How often the pass runs while a tuning job is live. */
#define TUNER_POLL_MS 50

/* Starts the tuner's thread (app->tuner). 0, or -1 (logged). */
int tuner_start(struct app *app);
/* Stops and frees it (after the pass in flight). */
void tuner_stop(struct app *app);
/* A pass soon (any thread). */
void tuner_poke(struct app *app);

/* Checks a POST /api/v1/tuning-jobs body (the base job by jobs_submit's
 * own checks, as its first trial would be submitted) and inserts the
 * tuning job; nothing is made on any refusal. JOBS_SUBMIT_OK with *id,
 * _INVALID (why->err names the field, "job." before a base job's field),
 * _EXISTS (the user has a tuning job of that name), _QUOTA, _ERROR. */
enum jobs_submit_result tuner_create(struct app *app, int64_t user_id, const char *user,
				     const char *address, json_t *body, int64_t *id,
				     struct jobs_refusal *why);
/* Stops a live tuning job: Stopping, each live trial's job stopped (as a
 * job's stop: SIGTERM, the grace, SIGKILL), trials not yet submitted never
 * are; the tuner ends it Stopped once no trial runs. 0, -EALREADY when it
 * is not InProgress, or a negative errno. */
int tuner_stop_job(struct app *app, const struct tuning_job *t, const char *actor);

/* The tuning job's JSON view: its request, status, trial counts and best
 * trial; full adds the base job and every trial. NULL on failure. */
json_t *tuner_json(struct app *app, const struct tuning_job *t, bool full);

#endif
