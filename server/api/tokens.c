/* tokens.c - a user's API tokens: list, create (shown once, with scopes and
 * an expiry), revoke. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "api/api.h"
#include "auth/auth.h"
#include "auth/scope.h"
#include "config/config.h"
#include "store/sessions.h"
#include "labd/app.h"
#include "labd/log.h"
#include "store/audit.h"
#include "store/db.h"
#include "http/http.h"
#include "store/tokens.h"

/* The scopes a token holds now: its own, cut down to its owner's role. */
static json_t *scopes_json(const char *stored, enum user_role role)
{
	unsigned set = (scope_parse_list(stored, role) | SCOPE_IDENTIFY) & scope_of_role(role);
	json_t *list = json_array();

	for (unsigned bit = 1; bit && bit <= set; bit <<= 1)
		if ((set & bit) && scope_name(bit))
			json_array_append_new(list, json_string(scope_name(bit)));
	return list;
}

static json_t *token_json(const struct token_info *t, enum user_role role)
{
	char created[21], used[21], expires[21];

	api_time(t->created_at, created);
	api_time(t->last_used_at, used);
	api_time(t->expires_at, expires);
	return json_pack("{s:I,s:s,s:s,s:s,s:o,s:o,s:o}", "id", (json_int_t)t->id, "name",
			 t->name, "prefix", t->prefix, "created_at", created, "last_used_at",
			 t->last_used_at ? json_string(used) : json_null(), "scopes",
			 scopes_json(t->scopes, role), "expires_at",
			 t->expires_at ? json_string(expires) : json_null());
}

struct token_list {
	json_t *list;
	enum user_role role;
};

static int append_token(const struct token_info *t, void *ctx)
{
	struct token_list *l = ctx;

	json_array_append_new(l->list, token_json(t, l->role));
	return 0;
}

void api_tokens_list(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	struct token_list l = {json_array(), ident->user.role};

	if (tokens_each(http_app(req)->db, ident->user.id, append_token, &l) < 0) {
		json_decref(l.list);
		http_reply_internal(req);
		return;
	}
	http_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "tokens", l.list));
}

/* A token outlives the session that made it, so creating one asks for proof
 * that the person, not merely a page in their browser, is there: the password
 * again, or a login within [auth] token_reauth. True when the request may go
 * on; otherwise the reply is set. */
static bool reauthenticated(struct http_request *req, json_t *body)
{
	const struct auth_identity *ident = http_identity(req);
	struct app *app = http_app(req);
	const char *password = NULL;
	int64_t login_at = 0, retry_after = 0;
	int rc = api_string(req, body, "password", &password);
	enum login_result res;

	if (rc < 0)
		return false;
	if (rc == 1) {
		/* throttled and hashed in bounded slots like a login: a page that
		 * guesses here must not get more tries than the login form */
		res = auth_check_password(app, &ident->user, password, http_address(req),
					  "password.failure", &retry_after);
		if (res == LOGIN_OK)
			return true;
		if (res == LOGIN_INVALID)
			http_reply_error(req, MHD_HTTP_FORBIDDEN, "reauth_failed",
					 "field \"password\" is not your password");
		else
			api_login_failed(req, res, retry_after);
		return false;
	}
	rc = ident->kind == AUTH_COOKIE
		     ? sessions_created_at(app->db, ident->session_id, &login_at)
		     : 0;
	if (rc < 0) {
		http_reply_internal(req);
		return false;
	}
	if (rc == 1 && time(NULL) - login_at < app->cfg->token_reauth_s)
		return true;
	http_reply_error(req, MHD_HTTP_FORBIDDEN, "reauth_required",
			 "field \"password\" is required: creating a token needs your password "
			 "(or a login within the last %lld seconds)",
			 (long long)app->cfg->token_reauth_s);
	return false;
}

/* Reads "scopes" into *set: absent = every scope the caller holds (the
 * owner's, or less for a token making a token). A name that is no scope is
 * 400; one the caller does not hold is 403, as a token never holds more
 * than whoever made it. 0, or -1 with the reply set. */
static int read_scopes(struct http_request *req, json_t *body, unsigned *set)
{
	unsigned held = http_identity(req)->scopes, bit;
	json_t *list = json_object_get(body, "scopes"), *v;
	size_t i;

	*set = held;
	if (!list)
		return 0;
	if (!json_is_array(list) || json_array_size(list) > 64) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "field \"scopes\" must be an array of scope names");
		return -1;
	}
	*set = SCOPE_IDENTIFY;
	json_array_foreach(list, i, v) {
		bit = json_is_string(v) ? scope_parse(json_string_value(v)) : 0;
		if (!bit) {
			http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
					 "field \"scopes\": item %zu is no scope (see docs/api.md, "
					 "\"Token scopes\")", i);
			return -1;
		}
		if (!(held & bit)) {
			http_reply_error(req, MHD_HTTP_FORBIDDEN, "forbidden",
					 "field \"scopes\": you do not hold \"%s\", so no token of "
					 "yours can", scope_name(bit));
			return -1;
		}
		*set |= bit;
	}
	return 0;
}

/* Reads "expires_in_s" into *expires_at (0 = never): 1 to [auth]
 * token_max_lifetime seconds, which is also the default when set. 0, or -1
 * with the reply set. */
static int read_expiry(struct http_request *req, json_t *body, int64_t now, int64_t *expires_at)
{
	int64_t max_s = http_app(req)->cfg->token_max_lifetime_s, in_s;
	json_t *v = json_object_get(body, "expires_in_s");

	*expires_at = max_s > 0 ? now + max_s : 0;
	if (max_s <= 0)
		max_s = TOKEN_LIFETIME_MAX_S;
	if (!v || json_is_null(v))
		return 0;
	in_s = json_is_integer(v) ? json_integer_value(v) : 0;
	if (in_s < 1 || in_s > max_s) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "field \"expires_in_s\" must be an integer from 1 to %lld (seconds)",
				 (long long)max_s);
		return -1;
	}
	*expires_at = now + in_s;
	return 0;
}

void api_tokens_create(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	struct app *app = http_app(req);
	static const char *const fields[] = {"name", "password", "scopes", "expires_in_s", NULL};
	const char *name = NULL;
	char token[TOKEN_LEN + 1], scopes[TOKEN_SCOPES_MAX];
	struct token_info info;
	json_t *body = api_body(req, fields), *out;
	int64_t now = time(NULL), expires_at;
	unsigned set;
	int rc;

	if (!body)
		return;
	if (api_string(req, body, "name", &name) != 1 || !tokens_name_valid(name)) {
		if (!http_has_reply(req))
			http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
					 "field \"name\" must be 1-%d printable characters",
					 TOKEN_NAME_MAX);
		goto out;
	}
	if (read_scopes(req, body, &set) < 0 || read_expiry(req, body, now, &expires_at) < 0 ||
	    !reauthenticated(req, body))
		goto out;
	scope_format(set, scopes, sizeof(scopes));
	rc = tokens_create(app->db, ident->user.id, name, scopes, expires_at, now, token, &info);
	if (rc == DB_CONFLICT) {
		http_reply_error(req, MHD_HTTP_CONFLICT, "conflict",
				 "you already have a token named \"%s\"", name);
	} else if (rc < 0) {
		http_reply_internal(req);
	} else {
		if (audit_add(app->db, now, ident->user.name, "token.create", ident->user.name,
			      http_address(req), name) < 0)
			log_error("audit: token.create of %s not recorded", ident->user.name);
		out = token_json(&info, ident->user.role);
		json_object_set_new(out, "token", json_string(token));
		http_reply_json(req, MHD_HTTP_CREATED, out);
	}
out:
	json_decref(body);
}

void api_tokens_delete(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	struct app *app = http_app(req);
	const char *text = http_match(req)->params[0];
	char *end, detail[32];
	long long id;
	int rc;

	errno = 0;
	id = strtoll(text, &end, 10);
	if (errno || *end || id <= 0) {
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no token with id %.32s",
				 text);
		return;
	}
	rc = tokens_delete(app->db, ident->user.id, id);
	if (rc < 0) {
		http_reply_internal(req);
	} else if (rc == 0) {
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no token with id %lld", id);
	} else {
		api_close_connections(req, APP_CLOSE_TOKEN, id);
		snprintf(detail, sizeof(detail), "id %lld", id);
		if (audit_add(app->db, time(NULL), ident->user.name, "token.revoke",
			      ident->user.name, http_address(req), detail) < 0)
			log_error("audit: token.revoke of %s not recorded", ident->user.name);
		http_reply_empty(req, MHD_HTTP_NO_CONTENT);
	}
}
