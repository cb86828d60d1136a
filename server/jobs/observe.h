/* observe.h - what labd-web observes of training jobs while they run and
 * keeps after (docs/jobs.md "Logs", "Metrics", "Profiling rules"): the
 * hooks the jobs lifecycle calls, the log followers the API's event
 * streams use, and the job object's observed fields.
 *
 * Who calls what: web/ calls observe_init after the store and backend are
 * up and observe_free at shutdown (after the HTTP server stopped); the jobs
 * lifecycle calls observe_job_started when a job's attempt starts running
 * its command (Downloading), observe_sample for each job_sample event,
 * observe_job_ended when the job is over (final status), and observe_tick
 * from the jobs pass (runner.h: every 250 ms while a job writes its log).
 * All may run on different threads; none of them waits for regex work,
 * which runs on observe's own thread ("metrics", observe.c). */
#ifndef LABD_JOBS_OBSERVE_H
#define LABD_JOBS_OBSERVE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "jobs/observe_rules.h"

struct app;
struct job;
struct backend_job_sample;
struct follow_hub;
struct jobs_live;

/* Metric points kept per metric and job; later points are dropped (the
 * final value is then the last kept: docs/jobs.md "Metrics"). */
#define OBSERVE_METRIC_POINTS_MAX 10000

/* Sets app->observe (the follower thread starts). 0, or -1 (logged). */
int observe_init(struct app *app);
/* Stops the follower thread and frees app->observe. NULL observe is fine. */
void observe_free(struct app *app);

/* A job's attempt began running (the log may start). */
void observe_job_started(struct app *app, int64_t job_id);
/* One job_sample of a running job: kept with its CPU and I/O-wait percent
 * since the job's previous sample, and for a GPU job its GPUs' utilisation
 * and memory when NVML reads them. */
void observe_sample(struct app *app, const struct job *job, const struct backend_job_sample *s);
/* The job is over (its log complete): the extraction thread reads the rest
 * of its log for metrics (a last line without newline included) on its
 * budget, then runs the rules a last time (if it trained); its followers
 * get the rest and "end". Returns at once: it never waits for the reading,
 * so the backend's reader thread may call it. Until the reading is done the
 * job's metrics_complete is false (observe_extraction_json). It may run
 * again (nothing left to do). */
void observe_job_ended(struct app *app, int64_t job_id);
/* A job the store says is over may not have been finished here (ended
 * while labd-web was down, or a path that marks it over before calling
 * observe_job_ended): observe_extraction_json asks the extraction thread to
 * finish it through this, given the job's job_observe log_offset and its
 * log's size. Cheap, never waits for the reading; any thread, the store's
 * lock held or not. True when the job's metrics are complete (it is over,
 * nothing of its log is unread and nothing is left to do for it). */
bool observe_settle_job(struct app *app, const struct job *j, int64_t log_offset, int64_t size);
/* Notes which jobs of the pass's live set (live.h) are running, for the
 * extraction thread that reads their new lines for metrics and evaluates
 * the profiling rules of each training job every [jobs] rules_interval.
 * Takes only observe's leaf lock: no regex work on the jobs thread. */
void observe_tick(struct app *app, const struct jobs_live *live);

/* Adds the observed fields to a job object: final_metrics (the last value
 * of each metric: final once metrics_complete), findings, log_bytes,
 * and observe_extraction_json's. When the store fails they are absent
 * (logged). Any thread, inside a walk of the store too. */
void observe_job_json(struct app *app, const struct job *j, json_t *obj);
/* Adds metrics_complete (the job is over and its whole log was read for
 * metrics, its rules' last run done: final_metrics and findings are final)
 * and dropped_metrics ([{"index", "name", "reason"}]: the definitions
 * dropped for hitting PCRE2's limits too often) to obj. -1 when the store
 * fails (logged). */
int observe_extraction_json(struct app *app, const struct job *j, json_t *obj);
/* {"name": [{"at", "value"}...]...} of every kept point; NULL on failure. */
json_t *observe_metrics_json(struct app *app, int64_t job_id);
/* [{"name", "value", "at"}...]: the last value of each metric; NULL on failure. */
json_t *observe_final_json(struct app *app, int64_t job_id);
/* [{rule, status, first_at, last_at, message, samples}...]: the job's
 * findings in the order first found; NULL on failure. */
json_t *observe_findings_json(struct app *app, int64_t job_id);
/* [{at, cpu_percent, ...}...]: the kept samples, oldest first; NULL on failure. */
json_t *observe_samples_json(struct app *app, int64_t job_id);

/* The log followers (borrowed from app->observe). */
struct follow_hub *observe_follow(struct app *app);

#endif
