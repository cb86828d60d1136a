/* quota_use.c - what a user has used of their rolling windows and storage,
 * what remains and when the next minutes free up (GET /api/v1/me/quota and
 * the admin's user quota), and the quota_exceeded refusal of a start. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "http/http.h"
#include "labd/app.h"
#include "sched/quota_check.h"

static json_t *time_or_null(int64_t t)
{
	char text[21];

	if (t <= 0)
		return json_null();
	api_time(t, text);
	return json_string(text);
}

/* "4h", "90m" or "45s": whole hours or minutes when exact, for messages. */
static void duration_text(int64_t s, char out[24])
{
	if (s >= 3600 && s % 3600 == 0)
		snprintf(out, 24, "%lldh", (long long)(s / 3600));
	else if (s >= 60 && s % 60 == 0)
		snprintf(out, 24, "%lldm", (long long)(s / 60));
	else
		snprintf(out, 24, "%llds", (long long)s);
}

void api_reply_quota_exceeded(struct http_request *req, const struct quota_window *w)
{
	api_reply_quota_exceeded_status(req, MHD_HTTP_FORBIDDEN, w);
}

void api_reply_quota_exceeded_status(struct http_request *req, unsigned status,
				     const struct quota_window *w)
{
	char used[24], limit[24], at[21], message[400];
	int64_t window_s;
	enum runtime_kind kind;

	quota_window_shape(w->limit, &window_s, &kind);
	duration_text(w->used_s, used);
	duration_text(w->limit_s, limit);
	api_time(w->next_free_at, at);
	snprintf(message, sizeof(message),
		 "%s quota used up: %s used of %s in the last %s (%s); %s%s", kind == RUNTIME_GPU ? "GPU" : "CPU",
		 used, limit, window_s == 86400 ? "24 hours" : "7 days", quota_limit_name(w->limit),
		 w->next_free_at ? "the next minute frees up at " : "it never frees up under this limit: ask an admin",
		 w->next_free_at ? at : "");
	json_t *err = json_pack("{s:s,s:s,s:s,s:I,s:I,s:o}", "code", "quota_exceeded", "message",
				message, "limit", quota_limit_name(w->limit), "used_s",
				(json_int_t)w->used_s, "limit_s", (json_int_t)w->limit_s,
				"next_free_at", time_or_null(w->next_free_at));
	if (status == MHD_HTTP_TOO_MANY_REQUESTS && w->next_free_at > 0) {
		char after[24];
		int64_t wait_s = w->next_free_at - time(NULL);
		snprintf(after, sizeof(after), "%lld", (long long)(wait_s > 1 ? wait_s : 1));
		http_add_header(req, "Retry-After", after);
	}
	http_reply_json(req, status, json_pack("{s:o}", "error", err));
}

int api_quota_use_json(struct http_request *req, int64_t user_id, json_t *out)
{
	struct quota_status st;
	json_t *used = json_object(), *remaining = json_object(), *next = json_object();

	if (quota_status_read(http_app(req)->db, http_app(req)->cfg, user_id, time(NULL), &st) < 0) {
		json_decref(used), json_decref(remaining), json_decref(next);
		http_reply_internal(req);
		return -1;
	}
	for (int i = 0; i < QUOTA_WINDOWS; i++) {
		const struct quota_window *w = &st.win[i];
		const char *name = quota_limit_name(w->limit);
		json_object_set_new(used, name, json_integer(w->used_s));
		json_object_set_new(remaining, name,
				    w->remaining_s < 0 ? json_null() : json_integer(w->remaining_s));
		json_object_set_new(next, name, time_or_null(w->next_free_at));
	}
	json_object_set_new(out, "used", used);
	json_object_set_new(out, "remaining", remaining);
	json_object_set_new(out, "next_free_at", next);
	return 0;
}
