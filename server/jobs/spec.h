/* spec.h - the job spec the supervisor runs (spec.c). */
#ifndef LABD_JOBS_SPEC_H
#define LABD_JOBS_SPEC_H

#include <stdint.h>

struct app;
struct job;

/* What job j may still train: max_runtime_s bounds its training time summed
 * over attempts (docs/jobs.md "Restarts and retries"); <= 0 when used up. */
int64_t jobs_runtime_left_s(const struct job *j);
/* The spec of contract §3 for job j into a malloc'd JSON text, or NULL; its
 * max_runtime_s is what the job may still train (at least 1 s). */
char *jobs_backend_spec(const struct app *app, const struct job *j);

#endif
