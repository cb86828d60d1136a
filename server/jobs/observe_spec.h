/* observe_spec.h - a job's own profiling settings, the "rules" object of
 * POST /api/v1/jobs (docs/jobs.md "Profiling rules"): checked at submit,
 * read when the rules run. Pure (jansson only). */
#ifndef LABD_JOBS_OBSERVE_SPEC_H
#define LABD_JOBS_OBSERVE_SPEC_H

#include <jansson.h>
#include <stdint.h>

struct jobs_submit_error;

/* The longest warm-up a job may ask for. */
#define OBSERVE_WARMUP_MAX_S 86400
#define OBSERVE_STEP_METRIC_MAX 256

/* Checks body's "rules" (absent is fine) against the normalised spec (its
 * metric_definitions already checked) and copies it into spec. 0, or -1
 * with err naming the field ("rules.warmup_s"). */
int observe_spec_check(json_t *body, json_t *spec, struct jobs_submit_error *err);

/* What a job's spec asks of the rules. */
struct observe_spec {
	int64_t warmup_s;                          /* -1: [jobs] rules_warmup */
	char step_metric[OBSERVE_STEP_METRIC_MAX]; /* "": [jobs] rules_step_metric */
};

/* Reads spec_text's "rules" (a stored, checked spec; NULL or bad: none). */
void observe_spec_read(const char *spec_text, struct observe_spec *out);

#endif
