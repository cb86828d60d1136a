/* spec.h - the job spec the supervisor runs (spec.c). */
#ifndef LABD_JOBS_SPEC_H
#define LABD_JOBS_SPEC_H

struct app;
struct job;

/* The spec of contract §3 for job j into a malloc'd JSON text, or NULL. */
char *jobs_backend_spec(const struct app *app, const struct job *j);

#endif
