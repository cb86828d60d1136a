/* events.c - the events labd itself raises: a job's end, a runtime's end, a
 * warm pool about to expire, a quota window nearly used; see notify.h. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "labd/app.h"
#include "labd/log.h"
#include "notify/notify.h"
#include "sched/quota_check.h"
#include "store/webhooks.h"

static json_t *time_or_null(int64_t t)
{
	char text[21];
	struct tm tm;
	time_t tt = (time_t)t;

	if (t <= 0)
		return json_null();
	gmtime_r(&tt, &tm);
	strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return json_string(text);
}

/* Queues and lets go of data (an owned reference). */
static void raise_once(struct app *app, int64_t user_id, const char *event, const char *key,
		       json_t *data)
{
	if (data)
		notify_event_once(app, user_id, event, key, data);
	json_decref(data);
}

void notify_job_changed(struct app *app, int64_t job_id)
{
	struct webhook_job_end j;
	char key[64];
	const char *event;

	if (webhooks_job_end(app->db, job_id, &j) != 1)
		return;
	event = strcmp(j.status, "Failed") == 0 ? "job.failed" : "job.ended";
	snprintf(key, sizeof(key), "%s:%lld", event, (long long)j.id);
	raise_once(app, j.user_id, event, key,
		   json_pack("{s:I,s:s,s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:I,s:I}", "job_id",
			     (json_int_t)j.id, "name", j.name, "status", j.status,
			     "secondary_status", j.secondary, "failure_reason", j.failure_reason,
			     "exit_code", j.has_exit_code ? json_integer(j.exit_code) : json_null(),
			     "created_at", time_or_null(j.created_at), "started_at",
			     time_or_null(j.started_at), "ended_at", time_or_null(j.ended_at),
			     "training_ms", (json_int_t)j.training_ms, "attempt",
			     (json_int_t)j.attempt));
	notify_quota_check(app, j.user_id);
}

void notify_runtime_ended(struct app *app, int64_t user_id, int64_t runtime_id,
			  const char *kind, bool failed, const char *reason)
{
	char key[64];

	snprintf(key, sizeof(key), "runtime.ended:%lld", (long long)runtime_id);
	raise_once(app, user_id, "runtime.ended", key,
		   json_pack("{s:I,s:s,s:s,s:b,s:s}", "runtime_id", (json_int_t)runtime_id, "kind",
			     kind ? kind : "", "status", failed ? "failed" : "stopped", "failed",
			     failed, "reason", reason ? reason : ""));
	notify_quota_check(app, user_id);
}

void notify_warm_pool_expiring(struct app *app, int64_t user_id, int64_t pool_id,
			       int64_t job_id, int64_t until)
{
	char key[80];

	snprintf(key, sizeof(key), "warm_pool.expiring:%lld:%lld", (long long)pool_id,
		 (long long)until);
	raise_once(app, user_id, "warm_pool.expiring", key,
		   json_pack("{s:I,s:I,s:o}", "pool_id", (json_int_t)pool_id, "job_id",
			     (json_int_t)job_id, "available_until", time_or_null(until)));
}

void notify_quota_check(struct app *app, int64_t user_id)
{
	struct quota_status st;
	unsigned events = 0;
	int64_t now = time(NULL), window_s;
	enum runtime_kind kind;
	char key[80];

	/* the ledger read only for a user who asked to hear of it */
	if (webhooks_user_events(app->db, user_id, &events) < 0 ||
	    !(events & (1u << NOTIFY_QUOTA_LOW)) ||
	    quota_status_read(app->db, app->cfg, user_id, now, &st) < 0)
		return;
	for (int i = 0; i < QUOTA_WINDOWS; i++) {
		const struct quota_window *w = &st.win[i];
		if (w->limit_s <= 0 || w->used_s * 100 < w->limit_s * app->cfg->webhooks_quota_low_percent ||
		    quota_window_shape(w->limit, &window_s, &kind) < 0)
			continue;
		/* once per window length: the use stays past the mark until the
		 * window slides past it */
		snprintf(key, sizeof(key), "quota.low:%s:%lld", quota_limit_name(w->limit),
			 (long long)(now / window_s));
		raise_once(app, user_id, "quota.low", key,
			   json_pack("{s:s,s:I,s:I,s:I,s:i,s:o}", "limit", quota_limit_name(w->limit),
				     "limit_s", (json_int_t)w->limit_s, "used_s",
				     (json_int_t)w->used_s, "remaining_s", (json_int_t)w->remaining_s,
				     "percent_used", (int)(w->used_s * 100 / w->limit_s),
				     "next_free_at", time_or_null(w->next_free_at)));
	}
}

/* users looked at per heartbeat; more wait for the next one */
#define QUOTA_PASS_USERS 64

void notify_quota_pass(struct app *app)
{
	int64_t ids[QUOTA_PASS_USERS];
	int n = webhooks_billed_users(app->db, 1u << NOTIFY_QUOTA_LOW, ids, QUOTA_PASS_USERS);

	for (int i = 0; i < n; i++)
		notify_quota_check(app, ids[i]);
}
