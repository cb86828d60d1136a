/* audit.c - the audit log for admins, newest first, paged by id. */
#include <errno.h>
#include <stdlib.h>

#include "api/api.h"
#include "labd/app.h"
#include "store/audit.h"
#include "http/http.h"

static json_t *maybe_string(const char *s)
{
	return s ? json_string(s) : json_null();
}

static int append_entry(const struct audit_entry *e, void *ctx)
{
	char when[21];

	api_time(e->time, when);
	json_array_append_new(ctx, json_pack("{s:I,s:s,s:o,s:s,s:o,s:o,s:o}", "id",
					     (json_int_t)e->id, "time", when, "actor",
					     maybe_string(e->actor), "action", e->action, "target",
					     maybe_string(e->target), "address",
					     maybe_string(e->address), "detail",
					     maybe_string(e->detail)));
	return 0;
}

/* Reads an optional positive integer query parameter; -1 when malformed. */
static int query_number(struct http_request *req, const char *name, long long min,
			long long max, long long *out)
{
	const char *text = http_query(req, name);
	char *end;

	if (!text)
		return 0;
	errno = 0;
	*out = strtoll(text, &end, 10);
	if (errno || *end || text[0] == '\0' || *out < min || *out > max) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "query parameter \"%s\" must be a number from %lld to %lld", name,
				 min, max);
		return -1;
	}
	return 1;
}

void api_audit_list(struct http_request *req)
{
	long long limit = 100, before = 0;
	json_t *list;

	if (query_number(req, "limit", 1, 500, &limit) < 0 ||
	    query_number(req, "before", 1, INT64_MAX, &before) < 0)
		return;
	list = json_array();
	if (audit_each(http_app(req)->db, before, (int)limit, append_entry, list) < 0) {
		json_decref(list);
		http_reply_internal(req);
		return;
	}
	http_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "entries", list));
}
