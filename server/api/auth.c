/* auth.c - health, JSON login/logout, the current user and password change. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "labd/app.h"
#include "auth/password.h"
#include "config/config.h"
#include "labd/sandbox.h"
#include "labd/log.h"
#include "store/audit.h"
#include "auth/auth.h"
#include "http/http.h"
#include "runtime/runtime.h"
#include "store/sessions.h"
#include "store/tokens.h"

/* The host's gaps (a cgroup v1 controller missing, no swap accounting), as an array
 * of sentences: for admins only, it describes the machine. */
static json_t *host_warnings(struct app *app)
{
	const char *w = runtime_backend_warnings(app), *nl;
	json_t *list = json_array();

	for (; w && *w && (nl = strchr(w, '\n')); w = nl + 1)
		json_array_append_new(list, json_stringn(w, (size_t)(nl - w)));
	return list;
}

void api_health(struct http_request *req)
{
	bool up = runtime_backend_ping(http_app(req)) == 0;
	const struct auth_identity *ident = http_identity(req);
	json_t *body = json_pack("{s:s,s:s,s:s}", "status", up ? "ok" : "degraded", "version",
				 LABD_VERSION, "supervisor", up ? "ok" : "unreachable");

	if (ident->kind != AUTH_NONE && ident->user.role == USER_ROLE_ADMIN) {
		const struct labd_config *cfg = http_app(req)->cfg;
		json_object_set_new(body, "warnings", host_warnings(http_app(req)));
		/* settled by root before this process was forked (supervisor/netpath.h) */
		json_object_set_new(body, "network_path",
				    json_pack("{s:s,s:s}", "path",
					      cfg->net_path == SANDBOX_NET_VETH ? "veth" : "pasta",
					      "why", cfg->net_path_why));
	}
	http_reply_json(req, up ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, body);
}

void api_login_failed(struct http_request *req, enum login_result res, int64_t retry_after)
{
	char retry[24];

	switch (res) {
	case LOGIN_INVALID:
		http_reply_error(req, MHD_HTTP_UNAUTHORIZED, "invalid_credentials",
				 "wrong user name or password");
		return;
	case LOGIN_THROTTLED:
		snprintf(retry, sizeof(retry), "%lld", (long long)(retry_after > 0 ? retry_after : 1));
		http_add_header(req, "Retry-After", retry);
		http_reply_error(req, MHD_HTTP_TOO_MANY_REQUESTS, "throttled",
				 "too many failed logins: try again in %s seconds", retry);
		return;
	case LOGIN_BUSY:
		snprintf(retry, sizeof(retry), "%lld", (long long)(retry_after > 0 ? retry_after : 1));
		http_add_header(req, "Retry-After", retry);
		http_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, "busy",
				 "too many logins at once: try again in %s seconds", retry);
		return;
	default:
		http_reply_internal(req);
	}
}

void api_login(struct http_request *req)
{
	struct app *app = http_app(req);
	static const char *const fields[] = {"username", "password", NULL};
	const char *name = NULL, *password = NULL;
	char secret[SESSION_SECRET_LEN + 1], cookie[256];
	struct user user;
	struct session session;
	int64_t retry_after = 0;
	json_t *body = api_body(req, fields);

	if (!body)
		return;
	if (api_string(req, body, "username", &name) != 1 ||
	    api_string(req, body, "password", &password) != 1) {
		if (!http_has_reply(req))
			http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
					 "fields \"username\" and \"password\" are required");
		json_decref(body);
		return;
	}
	enum login_result res = auth_login(app, name, password, http_address(req), &user,
					   &session, secret, &retry_after);
	json_decref(body);
	if (res != LOGIN_OK) {
		api_login_failed(req, res, retry_after);
		return;
	}
	auth_cookie_header(app, secret, cookie, sizeof(cookie));
	http_add_header(req, "Set-Cookie", cookie);
	http_reply_json(req, MHD_HTTP_OK,
			json_pack("{s:o,s:s}", "user", api_user_json(&user), "csrf_token",
				  session.csrf_token));
}

void api_logout(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	struct app *app = http_app(req);
	char cookie[256];

	if (ident->kind == AUTH_COOKIE && sessions_delete(app->db, ident->session_id) < 0) {
		http_reply_internal(req);
		return;
	}
	if (ident->kind == AUTH_COOKIE)
		api_close_connections(req, APP_CLOSE_SESSION, ident->session_id);
	if (audit_add(app->db, time(NULL), ident->user.name, "logout", ident->user.name,
		      http_address(req), NULL) < 0)
		log_error("audit: logout of %s not recorded", ident->user.name);
	auth_cookie_header(app, NULL, cookie, sizeof(cookie));
	http_add_header(req, "Set-Cookie", cookie);
	http_reply_empty(req, MHD_HTTP_NO_CONTENT);
}

void api_me(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	json_t *me = api_user_json(&ident->user);

	/* the user's courses that end soon, for the dashboard's notice */
	json_object_set_new(me, "course_ends", api_course_ends_json(req, ident->user.id));
	json_object_set_new(me, "auth",
			    json_string(ident->kind == AUTH_COOKIE ? "cookie" : "token"));
	if (ident->kind == AUTH_COOKIE)
		json_object_set_new(me, "csrf_token", json_string(ident->csrf_token));
	http_reply_json(req, MHD_HTTP_OK, me);
}

void api_me_password(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	static const char *const fields[] = {"current_password", "new_password", "revoke_tokens",
					     NULL};
	const char *current = NULL, *next = NULL, *why;
	/* Default on: a password is changed when it may be known to someone else,
	 * who could have made tokens with it; a script's owner makes a new one. */
	bool revoke_tokens = true;
	char hash[PASSWORD_HASH_MAX];
	json_t *body = api_body(req, fields);
	struct app *app = http_app(req);
	enum login_result res;
	int64_t retry_after = 0;

	if (!body)
		return;
	if (api_string(req, body, "current_password", &current) != 1 ||
	    api_string(req, body, "new_password", &next) != 1) {
		if (!http_has_reply(req))
			http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
					 "fields \"current_password\" and \"new_password\" are "
					 "required");
	} else if (api_bool(req, body, "revoke_tokens", &revoke_tokens) < 0) {
		/* reply set: field "revoke_tokens" must be a boolean */
	} else if ((why = password_policy_error(next, app->cfg->min_password_length))) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "field \"new_password\" %s (at least %u characters)", why,
				 app->cfg->min_password_length);
	} else if ((res = auth_check_password(app, &ident->user, current, http_address(req),
					      "password.failure", &retry_after)) == LOGIN_INVALID) {
		http_reply_error(req, MHD_HTTP_FORBIDDEN, "forbidden",
				 "field \"current_password\" is wrong");
	} else if (res != LOGIN_OK) {
		api_login_failed(req, res, retry_after);
	} else if (password_hash(next, app->password, hash) < 0 ||
		   users_set_password(app->db, ident->user.id, hash, ident->session_id,
				      time(NULL)) != USERS_OK) {
		http_reply_internal(req);
	} else if (revoke_tokens && tokens_delete_all(app->db, ident->user.id) < 0) {
		http_reply_internal(req); /* the password changed; the tokens did not go */
	} else {
		/* other sessions ended; this one's WebSockets close too */
		api_close_connections(req, APP_CLOSE_USER_SESSIONS, ident->user.id);
		if (audit_add(app->db, time(NULL), ident->user.name, "password.change",
			      ident->user.name, http_address(req),
			      revoke_tokens ? "api tokens revoked" : "api tokens kept") < 0)
			log_error("audit: password.change of %s not recorded", ident->user.name);
		http_reply_empty(req, MHD_HTTP_NO_CONTENT);
	}
	json_decref(body);
}
