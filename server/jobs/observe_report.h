/* observe_report.h - a job's profiler report (docs/jobs.md "The profiler
 * report"): every rule with its status, finding and what to do about it,
 * the samples marked in or out of the warm-up with their percentiles, and
 * the step-time histogram. GET /api/v1/jobs/{id}/report serves it. */
#ifndef LABD_JOBS_OBSERVE_REPORT_H
#define LABD_JOBS_OBSERVE_REPORT_H

#include <jansson.h>
#include <stddef.h>

struct app;
struct job;

/* Bars of the step-time histogram at most. */
#define OBSERVE_HISTOGRAM_BARS 20

/* Pure: counts v[0..n) into bars equal-width bars from the least to the
 * greatest value (one bar when they are equal): [{"from", "to", "count"}],
 * each bar holding from <= v < to, the last also its to. A new reference;
 * an empty array for n 0, NULL when out of memory. */
json_t *observe_histogram_json(const double *v, size_t n, size_t bars);

/* The report of job j (its row read by the caller); NULL when the store
 * fails (logged) or out of memory. */
json_t *observe_report_json(struct app *app, const struct job *j);

#endif
