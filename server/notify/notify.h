/* notify.h - notifications: a user's webhooks hear of their jobs, runtimes,
 * warm pools and quota (docs/jobs.md "Notifications").
 *
 * An event is queued in the store (store/webhooks.h) by whoever knows it
 * happened, in the thread it happened in: one insert, no network. The
 * notify ticker, a thread of its own, sends what is due: signed (sign.h),
 * through the checks of target.h (send.h), retried with doubling waits, each
 * attempt logged. Deliveries persist, so a restart loses none. Nothing here
 * runs on a thread that serves requests but the insert.
 *
 * Folder rule (notify/, layer 6): includes common/, config/, metrics/,
 * sandbox/egress.h (the always-denied ranges), store/, sched/. */
#ifndef LABD_NOTIFY_H
#define LABD_NOTIFY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct app;

enum notify_event_kind {
	NOTIFY_JOB_ENDED,          /* Completed or Stopped */
	NOTIFY_JOB_FAILED,         /* Failed */
	NOTIFY_JOB_PREEMPTED,      /* stopped for another's capacity, queued again */
	NOTIFY_RUNTIME_ENDED,      /* stopped or failed, "failed" in the body */
	NOTIFY_WARM_POOL_EXPIRING, /* a warm pool's keep-alive ends within a minute */
	NOTIFY_QUOTA_LOW,          /* a quota window passed [webhooks] quota_low */
	NOTIFY_EVENTS
};

/* "job.ended", ... in the order of enum notify_event_kind. */
extern const char *const notify_event_names[NOTIFY_EVENTS];
/* The kind named name, or -1. */
int notify_event_parse(const char *name);

/* A warm pool's warm_pool.expiring is queued this long before its keep-alive ends. */
#define NOTIFY_WARM_LEAD_S 60

/* Starts the notify ticker (app->notify); 0 or a negative errno. */
int notify_start(struct app *app);
/* Stops it after the attempt in flight (at most [webhooks] timeout). */
void notify_stop(struct app *app);

/* Queues event (a name of notify_event_names) for user_id's webhooks that
 * take it, with data (borrowed; an object) as the body's "data". Every call
 * is a new event. Returns how many deliveries were queued, or a negative
 * errno. Any thread; one insert into the store, no network.
 *
 * For preemption (capacity: preemptible, docs/jobs.md): call it when a job
 * is stopped and put back in the queue, e.g.
 *   notify_event(app, job->user_id, "job.preempted",
 *                json_pack("{s:I,s:s,s:i}", "job_id", id, "name", name, "attempt", n));
 * (and decref the object after) */
int notify_event(struct app *app, int64_t user_id, const char *event, json_t *data);
/* The same, queued at most once per webhook for key (e.g. "job.ended:42"). */
int notify_event_once(struct app *app, int64_t user_id, const char *event, const char *key,
		      json_t *data);

/* The hooks labd's own events call. Each costs one indexed read when the
 * user has no webhook. */
/* After any change of job id's row (jobs_changed): job.ended or job.failed
 * once it has ended, and quota.low when its use passed the mark. */
void notify_job_changed(struct app *app, int64_t job_id);
/* A runtime ended (runtime_end): runtime.ended, and quota.low. */
void notify_runtime_ended(struct app *app, int64_t user_id, int64_t runtime_id,
			  const char *kind, bool failed, const char *reason);
/* A warm pool's keep-alive ends at until (Unix seconds) for job_id's pool. */
void notify_warm_pool_expiring(struct app *app, int64_t user_id, int64_t pool_id,
			       int64_t job_id, int64_t until);
/* notify_quota_check for every user billed now (a runtime or job live) who
 * holds a webhook for quota.low: the ledger's heartbeats call it, so the mark
 * is heard within a heartbeat of being passed, not only at the end. */
void notify_quota_pass(struct app *app);
/* quota.low for each of user_id's windows used past [webhooks] quota_low,
 * once per window length. */
void notify_quota_check(struct app *app, int64_t user_id);

#endif
