/* runtimes_admin.c - every user's live runtime, and an administrator's stop
 * (GET /api/v1/runtimes, DELETE /api/v1/runtimes/{id}). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "config/config.h"
#include "http/http.h"
#include "labd/app.h"
#include "labd/log.h"
#include "runtime/runtime.h"
#include "store/audit.h"
#include "store/runtimes.h"

#define STOP_REASON_MAX_CHARS 200
/* What the supervisor carries of a stop reason (proto.c, sandbox_stop): cut
 * here to that, so the runtime, the ledger and the answer show one text. */
#define RUNTIME_REASON_CARRIED_BYTES 150
_Static_assert(RUNTIME_REASON_CARRIED_BYTES < RUNTIME_REASON_MAX, "the reason fits a runtime row");

/* A runtime object of the list: the owner's view plus whose it is. */
static json_t *admin_runtime_json(const struct runtime *r, struct app *app)
{
	json_t *o = api_runtime_view(app, r);

	json_object_set_new(o, "user", json_string(r->user_name));
	return o;
}

struct runtime_list {
	json_t *list;
	struct app *app;
};

static int append_runtime(const struct runtime *r, void *ctx)
{
	struct runtime_list *l = ctx;

	json_array_append_new(l->list, admin_runtime_json(r, l->app));
	return 0;
}

void api_runtimes_list(struct http_request *req)
{
	struct app *app = http_app(req);
	struct runtime_list l = {json_array(), app};

	if (runtimes_each_live(app->db, append_runtime, &l) < 0) {
		json_decref(l.list);
		http_reply_internal(req);
		return;
	}
	http_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "runtimes", l.list));
}

/* True for at most max characters of UTF-8 text without control characters. */
static bool reason_valid(const char *text, size_t max)
{
	size_t chars = 0;

	for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
		if (*p < 0x20 || *p == 0x7f)
			return false;
		if ((*p & 0xc0) != 0x80)
			chars++;
	}
	return chars <= max;
}

/* Reads the optional body {"reason": "..."} into *reason (NULL = none given):
 * 0, or -1 with the reply set. The caller releases *body. */
static int read_reason(struct http_request *req, json_t **body, const char **reason)
{
	static const char *const fields[] = {"reason", NULL};
	size_t len = 0;
	int rc;

	*body = NULL;
	*reason = NULL;
	http_body(req, &len);
	if (len == 0)
		return 0; /* the body is optional */
	if (!(*body = api_body(req, fields)))
		return -1;
	if ((rc = api_string(req, *body, "reason", reason)) < 0)
		return -1;
	if (rc == 1 && !reason_valid(*reason, STOP_REASON_MAX_CHARS)) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "field \"reason\" must be at most %d characters of text",
				 STOP_REASON_MAX_CHARS);
		return -1;
	}
	if (rc == 1 && !**reason)
		*reason = NULL;
	return 0;
}

/* Cuts text to fit len bytes (its NUL included) without splitting a UTF-8
 * character, so the runtime's reason stays valid JSON text. */
static void cut_utf8(char *text, size_t len)
{
	size_t n = strlen(text);

	if (n < len)
		return;
	n = len - 1;
	while (n > 0 && ((unsigned char)text[n] & 0xc0) == 0x80)
		n--;
	text[n] = '\0';
}

/* The runtime in the path, live: 0, or -1 with the reply set (404/500). */
static int path_runtime(struct http_request *req, struct runtime *r)
{
	const char *text = http_match(req)->params[0];
	char *end;
	long long id;
	int rc;

	errno = 0;
	id = strtoll(text, &end, 10);
	rc = errno || *end || id <= 0 ? 0 : runtimes_find(http_app(req)->db, id, r);
	if (rc < 0) {
		http_reply_internal(req);
		return -1;
	}
	if (rc == 0 || !runtimes_state_live(r->state)) {
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no live runtime with id %.32s",
				 text);
		return -1;
	}
	return 0;
}

void api_runtimes_stop(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	struct app *app = http_app(req);
	char why[RUNTIME_REASON_MAX], detail[STOP_REASON_MAX_CHARS * 4 + 64];
	const char *reason;
	struct runtime r;
	json_t *body;

	if (read_reason(req, &body, &reason) < 0 || path_runtime(req, &r) < 0)
		goto out;
	/* The runtime's reason (and with it the ledger entry's end reason) says
	 * who stopped it; the whole reason goes to the audit log. */
	snprintf(why, sizeof(why), "stopped by an administrator (%s)%s%s", ident->user.name,
		 reason ? ": " : "", reason ? reason : "");
	cut_utf8(why, RUNTIME_REASON_CARRIED_BYTES + 1);
	/* one that is stopping already is not asked twice */
	if (r.state != RUNTIME_STOPPING && runtime_stop(app, &r, why) < 0) {
		http_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, "supervisor_unreachable",
				 "the supervisor did not answer; try again");
		goto out;
	}
	snprintf(detail, sizeof(detail), "runtime %lld: %s", (long long)r.id,
		 reason ? reason : "no reason given");
	if (audit_add(app->db, time(NULL), ident->user.name, "runtime.stop", r.user_name,
		      http_address(req), detail) < 0)
		log_error("audit: runtime.stop of %s by %s not recorded", r.user_name,
			  ident->user.name);
	if (runtimes_find(app->db, r.id, &r) < 0) {
		http_reply_internal(req);
		goto out;
	}
	http_reply_json(req, MHD_HTTP_ACCEPTED,
			api_runtime_reply(admin_runtime_json(&r, app)));
out:
	json_decref(body);
}
