/* notify.c - queueing events and the notify ticker that delivers them; see notify.h. */
#include "notify/notify.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "labd/app.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "labd/ticker.h"
#include "notify/send.h"
#include "sched/quota_check.h"
#include "store/users.h"
#include "store/webhooks.h"

/* deliveries read per pass; the pass comes again at once while more are due */
#define NOTIFY_BATCH 8
/* the longest wait between two tries, whatever the doubling says */
#define NOTIFY_RETRY_MAX_MS (6 * 3600 * 1000LL)
/* a body's bound: what the hooks put in it is small (a failure reason is at
 * most a KiB) */
#define NOTIFY_BODY_MAX (16 * 1024)

struct notify {
	struct app *app;
	struct ticker *ticker;
	int stopping; /* atomic: the pass in flight ends after its attempt */
};

const char *const notify_event_names[NOTIFY_EVENTS] = {
	"job.ended", "job.failed", "job.preempted", "runtime.ended", "warm_pool.expiring",
	"quota.low",
};

int notify_event_parse(const char *name)
{
	for (int i = 0; i < NOTIFY_EVENTS; i++)
		if (strcmp(name, notify_event_names[i]) == 0)
			return i;
	return -1;
}

static void rfc3339(int64_t t, char out[21])
{
	struct tm tm;
	time_t tt = (time_t)t;

	gmtime_r(&tt, &tm);
	strftime(out, 21, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* {"event", "created_at", "user", "data"} as compact text (caller frees), or NULL. */
static char *body_text(struct app *app, int64_t user_id, const char *event, json_t *data)
{
	struct user u = {0};
	char at[21];
	json_t *b;
	char *text;

	if (users_find_by_id(app->db, user_id, &u) != 1)
		u.name[0] = '\0';
	rfc3339(time(NULL), at);
	b = json_pack("{s:s,s:s,s:s,s:O}", "event", event, "created_at", at, "user", u.name,
		      "data", data);
	text = b ? json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(b);
	if (text && strlen(text) > NOTIFY_BODY_MAX) {
		free(text);
		return NULL;
	}
	return text;
}

int notify_event_once(struct app *app, int64_t user_id, const char *event, const char *key,
		      json_t *data)
{
	int kind = notify_event_parse(event);
	unsigned events = 0;
	char *body;
	int rc;

	if (kind < 0 || !json_is_object(data))
		return -EINVAL;
	/* the common case, a user without a webhook for it: one read, nothing built */
	if (webhooks_user_events(app->db, user_id, &events) < 0)
		return -EIO;
	if (!(events & (1u << kind)))
		return 0;
	if (!(body = body_text(app, user_id, event, data))) {
		log_error("notify: the %s body of user %lld could not be made", event,
			  (long long)user_id);
		return -ENOMEM;
	}
	rc = webhooks_enqueue(app->db, user_id, 1u << kind, event, key, body, clock_wall_ms());
	free(body);
	if (rc < 0) {
		log_error("notify: %s of user %lld not queued (the store failed)", event,
			  (long long)user_id);
		return -EIO;
	}
	struct notify *n = __atomic_load_n(&app->notify, __ATOMIC_SEQ_CST);
	if (rc > 0 && n)
		ticker_poke(n->ticker);
	return rc;
}

int notify_event(struct app *app, int64_t user_id, const char *event, json_t *data)
{
	static uint64_t serial;
	char key[80];

	/* unique: every call is its own event (the time keeps keys of an earlier
	 * process apart) */
	snprintf(key, sizeof(key), "%s:%lld:%" PRIu64, event, clock_wall_ms(),
		 __atomic_add_fetch(&serial, 1, __ATOMIC_SEQ_CST));
	return notify_event_once(app, user_id, event, key, data);
}

/* Whether the user's plan gives network egress: a webhook reaches only what
 * the user's own runtime could. */
static int user_has_egress(struct app *app, int64_t user_id)
{
	struct quota_status st;

	if (quota_status_read(app->db, app->cfg, user_id, time(NULL), &st) < 0)
		return -EIO;
	return st.eff.v[QL_NETWORK] == QUOTA_NETWORK_EGRESS;
}

static enum delivery_state judge(const struct labd_config *cfg, const struct notify_result *r,
				 int attempt, struct delivery_attempt *a, int64_t *next_at_ms)
{
	*next_at_ms = 0;
	if (r->status >= 200 && r->status < 300 && !r->error[0])
		return DELIVERY_DELIVERED;
	if (!r->error[0])
		snprintf(a->error, sizeof(a->error), "answered %d%s", r->status,
			 r->status >= 300 && r->status < 400 ? ": redirects are not followed" : "");
	/* no retry changes a refusal, a redirect or a request the receiver refuses */
	if (r->refused ||
	    (r->status >= 300 && r->status < 500 && r->status != 408 && r->status != 429))
		return DELIVERY_FAILED;
	if (attempt >= (int)cfg->webhooks_attempts)
		return DELIVERY_FAILED;
	int64_t wait = cfg->webhooks_retry_base_ms;
	for (int i = 1; i < attempt && wait < NOTIFY_RETRY_MAX_MS; i++)
		wait *= 2;
	*next_at_ms = clock_wall_ms() + (wait < NOTIFY_RETRY_MAX_MS ? wait : NOTIFY_RETRY_MAX_MS);
	return DELIVERY_PENDING;
}

static void deliver(struct notify *n, const struct delivery *d)
{
	struct app *app = n->app;
	struct webhook w;
	struct notify_result r = {0};
	struct delivery_attempt a = {.delivery_id = d->id, .attempt = d->attempts + 1};
	enum delivery_state state;
	int64_t next_at_ms;
	int egress;

	if (webhooks_find(app->db, d->user_id, d->webhook_id, &w) != 1)
		return; /* deleted meanwhile: its deliveries went with it */
	a.at_ms = clock_wall_ms();
	egress = user_has_egress(app, d->user_id);
	if (egress == 0) {
		r.refused = true;
		snprintf(r.error, sizeof(r.error), "refused: the user's plan gives no network egress");
	} else if (egress < 0) {
		snprintf(r.error, sizeof(r.error), "the user's limits could not be read");
	} else {
		struct notify_request rq = {.url = w.url, .secret = w.secret, .event = d->event,
					    .body = d->body, .delivery_id = d->id,
					    .timeout_s = app->cfg->webhooks_timeout_s,
					    .deny = app->cfg->net_deny};
		notify_send(&rq, &r);
	}
	a.status = r.status;
	a.duration_ms = r.duration_ms;
	snprintf(a.error, sizeof(a.error), "%s", r.error);
	state = judge(app->cfg, &r, a.attempt, &a, &next_at_ms);
	if (webhooks_record(app->db, d, &a, state, next_at_ms) < 0)
		log_error("notify: delivery %lld: attempt %d not recorded", (long long)d->id,
			  a.attempt);
	if (state != DELIVERY_DELIVERED)
		log_info("notify: delivery %lld (%s) to webhook %lld, attempt %d: %s%s",
			 (long long)d->id, d->event, (long long)w.id, a.attempt, a.error,
			 state == DELIVERY_FAILED ? "; given up" : "");
}

static long long pass(void *ctx)
{
	struct notify *n = ctx;
	struct delivery d[NOTIFY_BATCH];
	int64_t next_ms = 0;
	int k = webhooks_due(n->app->db, clock_wall_ms(), d, NOTIFY_BATCH, &next_ms);

	if (k < 0)
		return clock_ms() + 5000; /* the store failed: try again soon */
	for (int i = 0; i < k; i++) {
		if (!__atomic_load_n(&n->stopping, __ATOMIC_SEQ_CST))
			deliver(n, &d[i]);
		webhooks_delivery_release(&d[i]);
	}
	if (__atomic_load_n(&n->stopping, __ATOMIC_SEQ_CST))
		return TICKER_IDLE;
	/* what was sent may be due again later (a retry): a read more says when */
	if (k > 0)
		return clock_ms();
	return next_ms ? clock_ms_at(next_ms) : TICKER_IDLE;
}

int notify_start(struct app *app)
{
	struct notify *n = calloc(1, sizeof(*n));
	int rc;

	if (!n)
		return -ENOMEM;
	/* libcurl's global set-up before any thread of this process uses it (the
	 * notify part starts before single sign-on's discovery thread) */
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		free(n);
		return -EIO;
	}
	n->app = app;
	if ((rc = ticker_start("notify", pass, n, &n->ticker)) < 0) {
		free(n);
		return rc;
	}
	__atomic_store_n(&app->notify, n, __ATOMIC_SEQ_CST);
	return 0;
}

void notify_stop(struct app *app)
{
	struct notify *n = __atomic_exchange_n(&app->notify, NULL, __ATOMIC_SEQ_CST);

	if (!n)
		return;
	/* stopped last of the web process's parts (web.c): nothing queues
	 * events any more, so no poke comes after this */
	__atomic_store_n(&n->stopping, 1, __ATOMIC_SEQ_CST);
	ticker_stop(n->ticker);
	free(n);
}
