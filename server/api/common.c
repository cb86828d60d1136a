/* common.c - JSON body parsing and field readers shared by the API handlers. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "auth/scope.h"
#include "http/http.h"
#include "labd/app.h"
#include "labd/parse.h"
#include "store/users.h"

/* Nesting deeper than any labd request needs is refused before it costs anything. */
#define API_MAX_DEPTH 8

static int json_depth(json_t *v, int depth)
{
	const char *key;
	json_t *child;
	size_t i;
	int max = depth;

	if (depth > API_MAX_DEPTH)
		return depth;
	if (json_is_object(v)) {
		json_object_foreach(v, key, child) {
			int d = json_depth(child, depth + 1);
			max = d > max ? d : max;
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, child) {
			int d = json_depth(child, depth + 1);
			max = d > max ? d : max;
		}
	}
	return max;
}

json_t *api_parse_object(const char *text, size_t len, const char *const *allowed,
			 const char **code, char *message, size_t msglen)
{
	json_error_t err;
	const char *key;
	json_t *obj, *value;

	*code = "bad_json";
	obj = json_loadb(text ? text : "", len, JSON_REJECT_DUPLICATES, &err);
	if (!obj) {
		snprintf(message, msglen, "body is not valid JSON: %s (line %d, column %d)",
			 err.text, err.line, err.column);
		return NULL;
	}
	if (!json_is_object(obj) || json_depth(obj, 0) > API_MAX_DEPTH) {
		json_decref(obj);
		snprintf(message, msglen, "body must be a JSON object nested at most %d deep",
			 API_MAX_DEPTH);
		return NULL;
	}
	json_object_foreach(obj, key, value) {
		bool known = false;
		for (const char *const *a = allowed; *a; a++)
			known = known || strcmp(*a, key) == 0;
		if (!known) {
			*code = "bad_field";
			snprintf(message, msglen, "unknown field \"%.64s\"", key);
			json_decref(obj);
			return NULL;
		}
	}
	return obj;
}

json_t *api_body(struct http_request *req, const char *const *allowed)
{
	const char *code, *body;
	char message[256];
	size_t len;
	json_t *obj;

	if (!http_content_type_is(req, "application/json")) {
		http_reply_error(req, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type",
				 "send the body as Content-Type: application/json");
		return NULL;
	}
	body = http_body(req, &len);
	obj = api_parse_object(body, len, allowed, &code, message, sizeof(message));
	if (!obj)
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, code, "%s", message);
	return obj;
}

int api_string(struct http_request *req, json_t *obj, const char *field, const char **out)
{
	json_t *v = json_object_get(obj, field);

	if (!v)
		return 0;
	if (!json_is_string(v)) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "field \"%s\" must be a string", field);
		return -1;
	}
	*out = json_string_value(v);
	/* Embedded NUL bytes would make the C string disagree with the JSON one. */
	if (strlen(*out) != json_string_length(v)) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "field \"%s\" must not contain NUL characters", field);
		return -1;
	}
	return 1;
}

int api_bool(struct http_request *req, json_t *obj, const char *field, bool *out)
{
	json_t *v = json_object_get(obj, field);

	if (!v)
		return 0;
	if (!json_is_boolean(v)) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "field \"%s\" must be true or false", field);
		return -1;
	}
	*out = json_is_true(v);
	return 1;
}

void api_time(int64_t t, char out[21])
{
	struct tm tm;
	time_t tt = (time_t)t;

	gmtime_r(&tt, &tm);
	strftime(out, 21, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

json_t *api_user_json(const struct user *u)
{
	char created[21];

	api_time(u->created_at, created);
	return json_pack("{s:s,s:s,s:b,s:s,s:s}", "name", u->name, "role",
			 users_role_name(u->role), "disabled", u->disabled, "created_at", created,
			 "email", u->email);
}


void api_close_connections(struct http_request *req, int what, int64_t id)
{
	struct app *app = http_app(req);

	if (app->close_connections)
		app->close_connections(app, (enum app_close)what, id);
}

const char *api_path_name(struct http_request *req)
{
	const char *name = http_match(req)->params[0];
	return parse_user_name_ok(name) ? name : NULL;
}

int api_path_found(struct http_request *req, const char *what, int rc)
{
	if (rc < 0)
		http_reply_internal(req);
	else if (rc == 0)
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no %s named \"%.32s\"", what,
				 http_match(req)->params[0]);
	return rc == 1 ? 0 : -1;
}

int api_path_user(struct http_request *req, struct user *u)
{
	const char *name = api_path_name(req);
	return api_path_found(req, "user", name ? users_find_by_name(http_app(req)->db, name, u) : 0);
}

bool api_admin_reach(struct http_request *req, unsigned admin_scope)
{
	const struct auth_identity *ident = http_identity(req);

	return ident->user.role == USER_ROLE_ADMIN && (ident->scopes & admin_scope) == admin_scope;
}

int api_list_owner(struct http_request *req, const char *what, unsigned admin_scope,
		   int64_t *user_id)
{
	const struct auth_identity *ident = http_identity(req);
	const char *name = http_query(req, "user");
	struct user u;
	int rc;

	*user_id = ident->user.id;
	if (!name)
		return 0;
	if (ident->user.role != USER_ROLE_ADMIN) {
		http_reply_error(req, MHD_HTTP_FORBIDDEN, "forbidden",
				 "only an administrator may list another user's %s", what);
		return -1;
	}
	if (!api_admin_reach(req, admin_scope)) {
		http_reply_error(req, MHD_HTTP_FORBIDDEN, "insufficient_scope",
				 "this API token lacks the scope \"%s\" that another user's %s need",
				 scope_name(admin_scope), what);
		return -1;
	}
	rc = parse_user_name_ok(name) ? users_find_by_name(http_app(req)->db, name, &u) : 0;
	if (rc < 0) {
		http_reply_internal(req);
		return -1;
	}
	if (rc == 0) {
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no user named \"%.32s\"",
				 name);
		return -1;
	}
	*user_id = u.id;
	return 0;
}

void api_reply_field(struct http_request *req, const char *field, const char *fmt, ...)
{
	char message[256];
	va_list ap;
	json_t *body;

	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	body = http_error_json("bad_field", message);
	json_object_set_new(json_object_get(body, "error"), "field", json_string(field));
	http_reply_json(req, MHD_HTTP_BAD_REQUEST, body);
}

int api_query_uint(struct http_request *req, const char *name, uint64_t min, uint64_t max,
		   uint64_t *out)
{
	const char *text = http_query(req, name);

	if (!text || parse_uint(text, min, max, out) == 0)
		return 0;
	api_reply_field(req, name, "query parameter \"%s\" must be a whole number from %llu to %llu",
			name, (unsigned long long)min, (unsigned long long)max);
	return -1;
}
