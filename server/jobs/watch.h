/* watch.h - the registry of who wants to hear when a training job changes
 * (its status events stream, GET /api/v1/jobs/{id}/events): labd/watch.h,
 * keyed by job id, each subscription counted against the subscribing user.
 *
 * The jobs layer calls jobs_watch_notify after each transition of a job;
 * subscribers get the job (a const struct job *, NULL once it is deleted) as
 * it is in the store then, once per change of what a job's reader sees move
 * (status, secondary status, attempt, pool, exit code, warm pool status,
 * reused_by). Subscribing to a job that does not exist fails (-ENOENT). */
#ifndef LABD_JOBS_WATCH_H
#define LABD_JOBS_WATCH_H

#include <stdint.h>

struct app;
struct db;
struct watch;

/* A registry reading jobs from db (borrowed until watch_free), with at most
 * max_per_user subscriptions per user and max_total in all. NULL on failure
 * (logged). */
struct watch *jobs_watch_new(struct db *db, unsigned max_per_user, unsigned max_total);
/* Tells job_id's subscribers (app->jobs_watch) that it may have changed. */
void jobs_watch_notify(struct app *app, int64_t job_id);

#endif
