/* tokens.c - a user's API tokens: list, create (shown once), revoke. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "api/api.h"
#include "auth/auth.h"
#include "config/config.h"
#include "store/sessions.h"
#include "labd/app.h"
#include "labd/log.h"
#include "store/audit.h"
#include "store/db.h"
#include "http/http.h"
#include "store/tokens.h"

static json_t *token_json(const struct token_info *t)
{
	char created[21], used[21];

	api_time(t->created_at, created);
	api_time(t->last_used_at, used);
	return json_pack("{s:I,s:s,s:s,s:s,s:o}", "id", (json_int_t)t->id, "name", t->name, "prefix",
			 t->prefix, "created_at", created, "last_used_at",
			 t->last_used_at ? json_string(used) : json_null());
}

static int append_token(const struct token_info *t, void *ctx)
{
	json_array_append_new(ctx, token_json(t));
	return 0;
}

void api_tokens_list(struct http_request *req)
{
	json_t *list = json_array();

	if (tokens_each(http_app(req)->db, http_identity(req)->user.id, append_token, list) < 0) {
		json_decref(list);
		http_reply_internal(req);
		return;
	}
	http_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "tokens", list));
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

void api_tokens_create(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	struct app *app = http_app(req);
	static const char *const fields[] = {"name", "password", NULL};
	const char *name = NULL;
	char token[TOKEN_LEN + 1];
	struct token_info info;
	json_t *body = api_body(req, fields), *out;
	int rc;

	if (!body)
		return;
	if (api_string(req, body, "name", &name) != 1 || !tokens_name_valid(name)) {
		if (!http_has_reply(req))
			http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
					 "field \"name\" must be 1-%d printable characters",
					 TOKEN_NAME_MAX);
		json_decref(body);
		return;
	}
	if (!reauthenticated(req, body)) {
		json_decref(body);
		return;
	}
	rc = tokens_create(app->db, ident->user.id, name, time(NULL), token, &info);
	if (rc == DB_CONFLICT) {
		http_reply_error(req, MHD_HTTP_CONFLICT, "conflict",
				 "you already have a token named \"%s\"", name);
	} else if (rc < 0) {
		http_reply_internal(req);
	} else {
		if (audit_add(app->db, time(NULL), ident->user.name, "token.create",
			      ident->user.name, http_address(req), name) < 0)
			log_error("audit: token.create of %s not recorded", ident->user.name);
		out = token_json(&info);
		json_object_set_new(out, "token", json_string(token));
		http_reply_json(req, MHD_HTTP_CREATED, out);
	}
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
