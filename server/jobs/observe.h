/* observe.h - job observability hooks (part B2 owns this header: logs,
 * metrics, samples, profiling rules, status watchers). The jobs lifecycle
 * (part B1) calls them; until B2's branch lands, observe.c has empty
 * bodies and B2 replaces both files. */
#ifndef LABD_JOBS_OBSERVE_H
#define LABD_JOBS_OBSERVE_H

#include <jansson.h>
#include <stdint.h>

struct app;
struct job;
struct backend_job_sample;

/* Set up and tear down (web/ calls them around the jobs thread). 0 or -1. */
int observe_init(struct app *app);
void observe_free(struct app *app);
/* The job's command started (phase training). */
void observe_job_started(struct app *app, int64_t job_id);
/* A sample of the job's sandbox (every [jobs] sample_interval while it trains). */
void observe_sample(struct app *app, const struct job *job, const struct backend_job_sample *s);
/* The job is over: final metrics computed, followers drain and stop. */
void observe_job_ended(struct app *app, int64_t job_id);
/* From the jobs thread every 250 ms: tails logs, extracts metrics, rules. */
void observe_tick(struct app *app);
/* Adds "final_metrics", "findings" and "log_bytes" to a job object. */
void observe_job_json(struct app *app, int64_t job_id, json_t *obj);
/* The job's row changed (status events). */
void jobs_watch_notify(struct app *app, int64_t job_id);

#endif
