/* observe_rules.h - the profiling rules' run over a job's kept samples
 * (observe_rules.c), and the small JSON pieces the rules' evidence and the
 * views (observe_json.c) share. Below observe.c and observe_json.c: it
 * includes neither, so the two do not call each other. */
#ifndef LABD_JOBS_OBSERVE_RULES_H
#define LABD_JOBS_OBSERVE_RULES_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct gpu_info;
struct job_sample_row;
struct labd_config;
struct observe;
struct rule_limits;
struct tracked;

/* Samples kept per job (the newest). */
#define OBSERVE_SAMPLES_KEEP 600

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
/* On the extraction thread (t is its own): evaluates the rules for t and
 * stores what fires. */
void observe_rules_run(struct observe *o, struct tracked *t, int64_t now_ms);

#endif
