/* users.c - admin account management: list, create, show, change, delete. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "jobs/jobs.h"
#include "labd/app.h"
#include "auth/password.h"
#include "config/config.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "runtime/runtime.h"
#include "store/audit.h"
#include "store/db.h"
#include "http/http.h"
#include "store/users.h"

static int append_user(const struct user *u, void *ctx)
{
	json_array_append_new(ctx, api_user_json(u));
	return 0;
}

void api_users_list(struct http_request *req)
{
	json_t *list = json_array();

	if (users_each(http_app(req)->db, append_user, list) < 0) {
		json_decref(list);
		http_reply_internal(req);
		return;
	}
	http_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "users", list));
}

/* Chooses the password for a create/reset: the given one after the policy
 * check, or a generated one (copied to generated[]). Hashes it into hash[].
 * Returns 0, or -1 with the reply set. */
static int choose_password(struct http_request *req, const char *given, char generated[24],
			   char hash[PASSWORD_HASH_MAX])
{
	const char *why;

	generated[0] = '\0';
	if (given && (why = password_policy_error(given, http_app(req)->cfg->min_password_length))) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "field \"password\" %s (at least %u characters)", why,
				 http_app(req)->cfg->min_password_length);
		return -1;
	}
	if (!given && password_generate(generated) < 0) {
		http_reply_internal(req);
		return -1;
	}
	if (password_hash(given ? given : generated, http_app(req)->password, hash) < 0) {
		http_reply_internal(req);
		return -1;
	}
	return 0;
}

static int read_role(struct http_request *req, json_t *body, bool *present, enum user_role *role)
{
	const char *text = NULL;
	int rc = api_string(req, body, "role", &text);

	*present = rc == 1;
	if (rc == 1 && users_role_parse(text, role) < 0) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "field \"role\" must be \"admin\" or \"user\"");
		return -1;
	}
	return rc < 0 ? -1 : 0;
}

void api_users_create(struct http_request *req)
{
	struct app *app = http_app(req);
	static const char *const fields[] = {"name", "role", "password", NULL};
	const char *name = NULL, *password = NULL;
	enum user_role role = USER_ROLE_USER;
	bool has_role;
	char generated[24], hash[PASSWORD_HASH_MAX];
	struct user u;
	json_t *body = api_body(req, fields), *out;
	int rc;

	if (!body)
		return;
	if (api_string(req, body, "name", &name) != 1 || !parse_user_name_ok(name)) {
		if (!http_has_reply(req))
			http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
					 "field \"name\" must match " PARSE_USER_NAME_RULE);
		goto out;
	}
	if (read_role(req, body, &has_role, &role) < 0 ||
	    api_string(req, body, "password", &password) < 0 ||
	    choose_password(req, password, generated, hash) < 0)
		goto out;
	rc = users_create(app->db, name, role, hash, time(NULL), &u);
	if (rc == DB_CONFLICT) {
		http_reply_error(req, MHD_HTTP_CONFLICT, "conflict", "user \"%s\" already exists",
				 name);
		goto out;
	}
	if (rc < 0) {
		http_reply_internal(req);
		goto out;
	}
	if (audit_add(app->db, time(NULL), http_identity(req)->user.name, "user.create", name,
		      http_address(req), users_role_name(role)) < 0)
		log_error("audit: user.create of %s not recorded", name);
	out = json_pack("{s:o}", "user", api_user_json(&u));
	if (generated[0])
		json_object_set_new(out, "password", json_string(generated));
	http_reply_json(req, MHD_HTTP_CREATED, out);
out:
	json_decref(body);
}

void api_users_get(struct http_request *req)
{
	struct user u;

	if (api_path_user(req, &u) == 0)
		http_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "user", api_user_json(&u)));
}

static void reply_change_failed(struct http_request *req, int rc)
{
	if (rc == USERS_LAST_ADMIN)
		http_reply_error(req, MHD_HTTP_CONFLICT, "last_admin",
				 "this would leave no enabled administrator");
	else if (rc == USERS_NOT_FOUND)
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no such user");
	else
		http_reply_internal(req);
}

/* Describes a PATCH for the audit log, e.g. "role=admin disabled=true password". */
static void describe_patch(char *out, size_t len, bool has_role, enum user_role role,
			   bool has_disabled, bool disabled, bool password)
{
	snprintf(out, len, "%s%s%s%s%s", has_role ? "role=" : "",
		 has_role ? users_role_name(role) : "",
		 has_disabled ? (disabled ? " disabled=true" : " disabled=false") : "",
		 password ? " password" : "", "");
}

void api_users_patch(struct http_request *req)
{
	struct app *app = http_app(req);
	static const char *const fields[] = {"role", "disabled", "password", "reset_password", NULL};
	const char *password = NULL;
	enum user_role role;
	bool has_role, disabled = false, reset = false;
	char generated[24], hash[PASSWORD_HASH_MAX], detail[96];
	struct user u;
	json_t *body = api_body(req, fields), *out;
	int has_disabled, has_password, has_reset, rc;

	if (!body)
		return;
	if (api_path_user(req, &u) < 0 || read_role(req, body, &has_role, &role) < 0 ||
	    (has_disabled = api_bool(req, body, "disabled", &disabled)) < 0 ||
	    (has_password = api_string(req, body, "password", &password)) < 0 ||
	    (has_reset = api_bool(req, body, "reset_password", &reset)) < 0)
		goto out;
	if (has_password && reset) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "send either \"password\" or \"reset_password\", not both");
		goto out;
	}
	if ((has_password || reset) && choose_password(req, password, generated, hash) < 0)
		goto out;
	/* Validation is complete; now change, role/disabled first (the guarded part). */
	rc = users_update(app->db, u.name, has_role ? &role : NULL,
			  has_disabled ? &disabled : NULL, time(NULL));
	if (rc == USERS_OK && (has_password || reset))
		rc = users_set_password(app->db, u.id, hash, 0, time(NULL));
	if (rc != USERS_OK) {
		reply_change_failed(req, rc);
		goto out;
	}
	/* a disabled account's code stops now, not at its deadline */
	if (has_disabled && disabled && runtime_end_account(app, u.id, "account disabled") < 0)
		log_error("the runtime of disabled user %s could not be stopped", u.name);
	if (has_disabled && disabled && jobs_end_account(app, u.id, "account disabled") < 0)
		log_error("the jobs of disabled user %s could not all be stopped", u.name);
	if (has_disabled && disabled)
		api_close_connections(req, APP_CLOSE_USER, u.id);
	else if (has_password || reset) /* every session of u ended */
		api_close_connections(req, APP_CLOSE_USER_SESSIONS, u.id);
	describe_patch(detail, sizeof(detail), has_role, role, has_disabled, disabled,
		       has_password || reset);
	if (audit_add(app->db, time(NULL), http_identity(req)->user.name,
		      (has_password || reset) && !has_role && !has_disabled ? "user.password_reset"
									    : "user.update",
		      u.name, http_address(req), detail) < 0)
		log_error("audit: change of user %s not recorded", u.name);
	if (users_find_by_id(app->db, u.id, &u) != 1) {
		http_reply_internal(req);
		goto out;
	}
	out = json_pack("{s:o}", "user", api_user_json(&u));
	if (reset)
		json_object_set_new(out, "password", json_string(generated));
	http_reply_json(req, MHD_HTTP_OK, out);
out:
	json_decref(body);
}

void api_users_delete(struct http_request *req)
{
	struct app *app = http_app(req);
	struct user u;
	int rc;

	if (api_path_user(req, &u) < 0)
		return;
	rc = users_delete(app->db, u.name);
	if (rc != USERS_OK) {
		reply_change_failed(req, rc);
		return;
	}
	/* after the rows are gone (so no start can race it): the supervisor
	 * stops every sandbox of theirs at once, warm pools too, retires the uid
	 * and archives the home after the last teardown */
	runtime_forget_account(app, u.name, u.id);
	jobs_forget_account(app); /* their job logs (the rows went with the account) */
	api_close_connections(req, APP_CLOSE_USER, u.id);
	if (audit_add(app->db, time(NULL), http_identity(req)->user.name, "user.delete", u.name,
		      http_address(req), NULL) < 0)
		log_error("audit: user.delete of %s not recorded", u.name);
	http_reply_empty(req, MHD_HTTP_NO_CONTENT);
}
