/* webhooks.c - a user's webhooks (docs/jobs.md "Notifications"):
 * POST/GET /api/v1/webhooks, DELETE /api/v1/webhooks/{id}, and the delivery
 * log GET /api/v1/webhooks/{id}/deliveries. Only the owner sees or changes
 * a webhook: another user's is not told apart from none (404). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "config/config.h"
#include "http/http.h"
#include "labd/app.h"
#include "labd/crypto.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "notify/notify.h"
#include "notify/target.h"
#include "sched/quota_check.h"
#include "store/audit.h"
#include "store/webhooks.h"

#define SECRET_MIN 16
#define SECRET_PREFIX "whsec_"
#define DELIVERIES_DEFAULT 50
#define DELIVERIES_MAX 200

static json_t *events_json(unsigned events)
{
	json_t *list = json_array();

	for (int i = 0; i < NOTIFY_EVENTS; i++)
		if (events & (1u << i))
			json_array_append_new(list, json_string(notify_event_names[i]));
	return list;
}

static json_t *webhook_json(const struct webhook *w)
{
	char created[21];

	api_time(w->created_at, created);
	return json_pack("{s:I,s:s,s:o,s:s}", "id", (json_int_t)w->id, "url", w->url, "events",
			 events_json(w->events), "created_at", created);
}

/* "events": a non-empty array of event names into *out; 0 or -1 (reply set). */
static int read_events(struct http_request *req, json_t *body, unsigned *out)
{
	json_t *list = json_object_get(body, "events"), *v;
	size_t i;
	int kind;

	*out = 0;
	if (!json_is_array(list) || json_array_size(list) == 0 || json_array_size(list) > 16) {
		api_reply_field(req, "events", "field \"events\" must be a non-empty array of event "
					       "names (job.ended, job.failed, job.preempted, "
					       "runtime.ended, warm_pool.expiring, quota.low)");
		return -1;
	}
	json_array_foreach(list, i, v) {
		kind = json_is_string(v) ? notify_event_parse(json_string_value(v)) : -1;
		if (kind < 0) {
			api_reply_field(req, "events", "field \"events\": item %zu is no event name", i);
			return -1;
		}
		*out |= 1u << kind;
	}
	return 0;
}

/* "url": checked for shape, and when it names an address, for the address. */
static int read_url(struct http_request *req, json_t *body, const char **url)
{
	struct app *app = http_app(req);
	char host[256], why[200];
	bool literal;
	int rc = api_string(req, body, "url", url);

	if (rc < 0)
		return -1;
	if (rc == 0) {
		api_reply_field(req, "url", "field \"url\" is required");
		return -1;
	}
	if (notify_url_check(*url, host, sizeof(host), &literal, why, sizeof(why)) < 0) {
		api_reply_field(req, "url", "field \"url\" %s", why);
		return -1;
	}
	if (literal && !notify_text_allowed(host, app->cfg->net_deny, why, sizeof(why))) {
		api_reply_field(req, "url", "field \"url\" is not reachable by your egress: %s", why);
		return -1;
	}
	return 0;
}

/* "secret": given (16-128 printable ASCII characters) or made here. */
static int read_secret(struct http_request *req, json_t *body, char *out, size_t len)
{
	const char *given = NULL;
	int rc = api_string(req, body, "secret", &given);

	if (rc < 0)
		return -1;
	if (rc == 1) {
		size_t n = strlen(given);
		bool printable = true;
		for (const char *p = given; *p; p++)
			printable &= *p > 0x20 && *p < 0x7f;
		if (n < SECRET_MIN || n > WEBHOOK_SECRET_MAX || !printable) {
			api_reply_field(req, "secret",
					"field \"secret\" must be %d-%d printable ASCII characters "
					"without spaces",
					SECRET_MIN, WEBHOOK_SECRET_MAX);
			return -1;
		}
		snprintf(out, len, "%s", given);
		return 0;
	}
	snprintf(out, len, SECRET_PREFIX);
	if (crypto_random_token(out + strlen(SECRET_PREFIX), len - strlen(SECRET_PREFIX), 32) < 0) {
		http_reply_internal(req);
		return -1;
	}
	return 0;
}

/* Deliveries go only through the user's own egress: a plan without it
 * could never deliver, so the webhook is refused at once. */
static int check_egress(struct http_request *req, int64_t user_id)
{
	struct app *app = http_app(req);
	struct quota_status st;

	if (quota_status_read(app->db, app->cfg, user_id, time(NULL), &st) < 0) {
		http_reply_internal(req);
		return -1;
	}
	if (st.eff.v[QL_NETWORK] != QUOTA_NETWORK_EGRESS) {
		http_reply_error(req, MHD_HTTP_FORBIDDEN, "no_egress",
				 "your plan gives no network egress, and webhooks are sent through "
				 "it");
		return -1;
	}
	return 0;
}

void api_webhooks_create(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	struct app *app = http_app(req);
	static const char *const fields[] = {"url", "events", "secret", NULL};
	struct webhook w = {.user_id = ident->user.id, .created_at = time(NULL)};
	json_t *body = api_body(req, fields), *out;
	const char *url = NULL;
	int rc;

	if (!body)
		return;
	if (read_url(req, body, &url) < 0 || read_events(req, body, &w.events) < 0 ||
	    read_secret(req, body, w.secret, sizeof(w.secret)) < 0 ||
	    check_egress(req, ident->user.id) < 0)
		goto out;
	snprintf(w.url, sizeof(w.url), "%s", url);
	rc = webhooks_create(app->db, &w, app->cfg->webhooks_max_per_user);
	if (rc < 0) {
		http_reply_internal(req);
	} else if (rc == 0) {
		http_reply_error(req, MHD_HTTP_CONFLICT, "too_many_webhooks",
				 "you have %u webhooks, the most one user may have; delete one first",
				 app->cfg->webhooks_max_per_user);
	} else {
		if (audit_add(app->db, w.created_at, ident->user.name, "webhook.create",
			      ident->user.name, http_address(req), w.url) < 0)
			log_error("audit: webhook.create of %s not recorded", ident->user.name);
		out = webhook_json(&w);
		/* shown once: the list never shows it again */
		json_object_set_new(out, "secret", json_string(w.secret));
		http_reply_json(req, MHD_HTTP_CREATED, json_pack("{s:o}", "webhook", out));
	}
out:
	json_decref(body);
}

static int add_webhook(const struct webhook *w, void *ctx)
{
	json_array_append_new(ctx, webhook_json(w));
	return 0;
}

void api_webhooks_list(struct http_request *req)
{
	json_t *list = json_array();

	if (webhooks_each(http_app(req)->db, http_identity(req)->user.id, add_webhook, list) < 0) {
		json_decref(list);
		http_reply_internal(req);
		return;
	}
	http_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "webhooks", list));
}

/* The caller's webhook named in the path: 0 with *w, or -1 (reply set). */
static int path_webhook(struct http_request *req, struct webhook *w)
{
	const char *text = http_match(req)->params[0];
	uint64_t id;
	int rc = parse_uint(text, 1, INT64_MAX, &id) == 0
			 ? webhooks_find(http_app(req)->db, http_identity(req)->user.id,
					 (int64_t)id, w)
			 : 0;

	if (rc < 0) {
		http_reply_internal(req);
		return -1;
	}
	if (rc == 0) {
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no webhook %.32s", text);
		return -1;
	}
	return 0;
}

void api_webhooks_delete(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	struct app *app = http_app(req);
	struct webhook w;

	if (path_webhook(req, &w) < 0)
		return;
	if (webhooks_delete(app->db, ident->user.id, w.id) < 0) {
		http_reply_internal(req);
		return;
	}
	if (audit_add(app->db, time(NULL), ident->user.name, "webhook.delete", ident->user.name,
		      http_address(req), w.url) < 0)
		log_error("audit: webhook.delete of %s not recorded", ident->user.name);
	http_reply_empty(req, MHD_HTTP_NO_CONTENT);
}

static json_t *ms_time(int64_t ms)
{
	char text[21];

	if (ms <= 0)
		return json_null();
	api_time(ms / 1000, text);
	return json_string(text);
}

static int add_attempt(const struct delivery_attempt *a, void *ctx)
{
	json_array_append_new(
		ctx, json_pack("{s:i,s:o,s:I,s:o,s:s}", "attempt", a->attempt, "at", ms_time(a->at_ms),
			       "duration_ms", (json_int_t)a->duration_ms, "status",
			       a->status ? json_integer(a->status) : json_null(), "error",
			       a->error));
	return 0;
}

static int add_delivery(const struct delivery *d, void *ctx)
{
	json_array_append_new(
		ctx,
		json_pack("{s:I,s:s,s:s,s:i,s:o,s:o,s:o,s:s}", "id", (json_int_t)d->id, "event",
			  d->event, "state", webhooks_state_name(d->state), "attempts", d->attempts,
			  "created_at", ms_time(d->created_at_ms), "next_attempt_at",
			  d->state == DELIVERY_PENDING ? ms_time(d->next_at_ms) : json_null(),
			  "last_status", d->last_status ? json_integer(d->last_status) : json_null(),
			  "last_error", d->last_error));
	return 0;
}

void api_webhooks_deliveries(struct http_request *req)
{
	struct app *app = http_app(req);
	struct webhook w;
	uint64_t limit = DELIVERIES_DEFAULT;
	json_t *list, *d, *log;
	size_t i;

	if (path_webhook(req, &w) < 0 ||
	    api_query_uint(req, "limit", 1, DELIVERIES_MAX, &limit) < 0)
		return;
	list = json_array();
	if (webhooks_deliveries_each(app->db, w.id, (int)limit, add_delivery, list) < 0)
		goto fail;
	/* each delivery's attempts, outside the walk */
	json_array_foreach(list, i, d) {
		log = json_array();
		json_object_set_new(d, "log", log);
		if (webhooks_attempts_each(app->db, json_integer_value(json_object_get(d, "id")),
					   add_attempt, log) < 0)
			goto fail;
	}
	http_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "deliveries", list));
	return;
fail:
	json_decref(list);
	http_reply_internal(req);
}
