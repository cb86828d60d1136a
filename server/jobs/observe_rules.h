/* observe_rules.h - the profiling rules' run over a job's kept samples
 * (observe_rules.c), and the small JSON pieces the rules' evidence and the
 * views (observe_json.c) share. Below observe.c and observe_json.c: it
 * includes neither, so the two do not call each other. */
#ifndef LABD_JOBS_OBSERVE_RULES_H
#define LABD_JOBS_OBSERVE_RULES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jobs/observe_spec.h"
#include "jobs/rules.h"

struct app;
struct gpu_info;
struct job_sample_row;
struct labd_config;
struct observe;
struct tracked;

/* Samples kept per job (the newest). */
#define OBSERVE_SAMPLES_KEEP 600
/* Step-time points the rules and the report look at: the newest. */
#define OBSERVE_STEPS_MAX 2000
/* Runs of a job's command (attempts) whose warm-ups are known. */
#define OBSERVE_RUNS_MAX 64

/* Formats epoch milliseconds as RFC 3339 UTC with milliseconds
 * ("2026-12-03T14:50:47.123Z") into out. */
#define OBSERVE_TIME_LEN 32
void observe_time(int64_t at_ms, char out[OBSERVE_TIME_LEN]);
/* The same as a JSON string (new reference). */
json_t *observe_time_json(int64_t at_ms);
/* One kept sample as the API shows it (new reference). */
json_t *observe_sample_json(const struct job_sample_row *s);

/* The rules' thresholds from [jobs] rules_*. */
void observe_limits(const struct labd_config *cfg, struct rule_limits *l);
/* Pure: the mean utilisation and summed used memory of the GPUs named in
 * ids ("0,2", a pool's) as info[0..n) reads them; -1 each when none is read. */
void observe_gpu_reading(const struct gpu_info *info, size_t n, const char *ids, double *percent,
			 int64_t *memory);
/* A job's readings as the rules read them: its kept samples, its step
 * metric's points, the start of each run (Training), and the thresholds
 * with its own warm-up and step metric. */
struct observe_input {
	struct rule_input in; /* points into the arrays below */
	struct rule_limits limits;
	char step_metric[OBSERVE_STEP_METRIC_MAX];
	struct job_sample_row *rows; /* the samples as stored, in.samples' order */
	struct rule_sample *samples;
	struct rule_point *steps;
	int64_t *step_at;
	double *step_v;
	int64_t runs[OBSERVE_RUNS_MAX];
};
/* Reads job_id's readings into x (in.now_ms and the output times left 0).
 * 0, or -1 (the store failed or out of memory; x holds nothing). Release
 * with observe_input_release. */
int observe_input_load(struct app *app, int64_t job_id, bool gpu, const struct observe_spec *spec,
		       int64_t started_ms, struct observe_input *x);
void observe_input_release(struct observe_input *x);

/* On the extraction thread (t is its own): evaluates the rules for t and
 * stores what fires. */
void observe_rules_run(struct observe *o, struct tracked *t, int64_t now_ms);

#endif
