/* audit.c - the audit log for admins, newest first, paged by id, filtered by
 * action, actor and time. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "labd/parse.h"
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

/* Reads an optional integer query parameter in [min, max]: 1 read, 0 absent,
 * -1 malformed (400 reply set, naming it). */
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

/* An action is dotted lower-case words ("user.create"); "runtime.*" asks for
 * every action under "runtime.". */
static bool action_valid(const char *a, size_t *prefix_len)
{
	size_t n = strlen(a);

	*prefix_len = 0;
	if (n == 0 || n > 64 || a[0] < 'a' || a[0] > 'z')
		return false;
	if (n >= 3 && strcmp(a + n - 2, ".*") == 0) {
		*prefix_len = n - 1; /* keeps the dot: "runtime." */
		n -= 2;
	}
	for (size_t i = 0; i < n; i++) {
		char c = a[i];
		bool dot_ok = c == '.' && a[i - 1] != '.' && i + 1 < n;
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || dot_ok))
			return false;
	}
	return true;
}

/* Fills f (and *prefix, the storage for its action prefix) from the query:
 * 0, or -1 with the 400 reply set naming the parameter. */
static int read_filter(struct http_request *req, struct audit_filter *f, char prefix[65])
{
	long long before = 0, from_s = 0, to_s = 0;
	const char *action = http_query(req, "action"), *actor = http_query(req, "actor");
	size_t prefix_len = 0;
	int has_from, has_to;

	if (query_number(req, "before", 1, INT64_MAX, &before) < 0 ||
	    (has_from = query_number(req, "from", 0, INT64_MAX, &from_s)) < 0 ||
	    (has_to = query_number(req, "to", 1, INT64_MAX, &to_s)) < 0)
		return -1;
	if (has_from && has_to && from_s >= to_s) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "query parameter \"from\" must be before \"to\"");
		return -1;
	}
	if (action && !action_valid(action, &prefix_len)) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "query parameter \"action\" must be an action such as user.create, "
				 "or a prefix such as runtime.*");
		return -1;
	}
	if (actor && !parse_user_name_ok(actor)) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "query parameter \"actor\" must be a user name "
				 "(" PARSE_USER_NAME_RULE ")");
		return -1;
	}
	*f = (struct audit_filter){.before = before, .actor = actor, .from_s = from_s, .to_s = to_s};
	if (action && prefix_len) {
		memcpy(prefix, action, prefix_len);
		prefix[prefix_len] = '\0';
		f->action_prefix = prefix;
	} else {
		f->action = action;
	}
	return 0;
}

void api_audit_list(struct http_request *req)
{
	long long limit = 100;
	struct audit_filter f;
	char prefix[65];
	json_t *list, *next;
	size_t n;

	if (query_number(req, "limit", 1, 500, &limit) < 0 || read_filter(req, &f, prefix) < 0)
		return;
	list = json_array();
	if (audit_each(http_app(req)->db, &f, (int)limit, append_entry, list) < 0) {
		json_decref(list);
		http_reply_internal(req);
		return;
	}
	/* A full page may have more behind it: next_before asks for the next one. */
	n = json_array_size(list);
	next = n == (size_t)limit ? json_object_get(json_array_get(list, n - 1), "id") : NULL;
	http_reply_json(req, MHD_HTTP_OK,
			json_pack("{s:o,s:O}", "entries", list, "next_before",
				  next ? next : json_null()));
}
