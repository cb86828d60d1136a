/* watch.h - who wants to hear when a training job changes (its status
 * events stream, GET /api/v1/jobs/{id}/events).
 *
 * The jobs layer calls jobs_watch_notify (observe.h) after each transition
 * of a job; subscribers get the job as it is in the store then. As
 * runtime/watch.h: a subscriber is a callback and its context, and names no
 * transport.
 *
 * Delivery: at subscription, then once per change of what a job's reader
 * sees move (status, secondary status, attempt, pool, exit code, warm pool
 * status, reused_by); changes in quick succession may be seen as their end
 * state only. Callbacks run under the registry's lock, one at a time: they
 * must not block nor call the registry back. */
#ifndef LABD_JOBS_WATCH_H
#define LABD_JOBS_WATCH_H

#include <stdint.h>

struct db;
struct job;
struct jobs_watch;
struct jobs_watcher;

/* j is the job, borrowed for the call; NULL when it is gone (deleted). */
typedef void (*jobs_watch_fn)(void *ctx, const struct job *j);

/* A registry reading rows from db (borrowed until jobs_watch_free), with
 * at most max_per_user subscriptions per user and max_total in all. NULL on
 * failure (logged). */
struct jobs_watch *jobs_watch_new(struct db *db, unsigned max_per_user, unsigned max_total);
/* Frees the registry and any subscription left. NULL is fine. */
void jobs_watch_free(struct jobs_watch *w);

/* Subscribes fn(ctx, j) to job_id (of user_id, who is counted) and calls it
 * once at once with the current row. 0 and *out (release with
 * jobs_watch_unsubscribe); -EUSERS when the user has max_per_user, -ENFILE
 * when the registry is full, -ENOENT when there is no such job, -ENOMEM,
 * -EIO. */
int jobs_watch_subscribe(struct jobs_watch *w, int64_t user_id, int64_t job_id, jobs_watch_fn fn,
			 void *ctx, struct jobs_watcher **out);
/* Ends a subscription: once it returns, fn is not running and never runs
 * again for it. NULL is fine. */
void jobs_watch_unsubscribe(struct jobs_watch *w, struct jobs_watcher *sub);
/* Tells job_id's subscribers that it may have changed. NULL w is fine. */
void jobs_watch_changed(struct jobs_watch *w, int64_t job_id);
/* Subscriptions of user_id now. */
unsigned jobs_watch_count(struct jobs_watch *w, int64_t user_id);

#endif
