/* quota.c - limits in JSON, a user's quota (admin) and the caller's own
 * effective limits with where each comes from. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "http/http.h"
#include "labd/app.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "store/audit.h"
#include "store/db.h"
#include "store/groups.h"
#include "store/user_quotas.h"
#include "store/users.h"

/* network reads "none" or "egress"; every other limit a number or "unlimited" */
static json_t *limit_value(int which, int64_t v)
{
	if (which == QL_NETWORK)
		return json_string(v == QUOTA_NETWORK_EGRESS ? "egress" : "none");
	return v == QUOTA_UNLIMITED ? json_string("unlimited") : json_integer(v);
}

/* "none" / "egress" of network into *out; -1 for anything else. */
static int network_value(json_t *v, int64_t *out)
{
	const char *s = json_is_string(v) ? json_string_value(v) : "";

	if (!strcmp(s, "none"))
		*out = QUOTA_NETWORK_NONE;
	else if (!strcmp(s, "egress"))
		*out = QUOTA_NETWORK_EGRESS;
	else
		return -1;
	return 0;
}

json_t *api_limits_json(const struct quota_limits *l)
{
	json_t *out = json_object();

	for (int i = 0; i < QL_COUNT; i++)
		if (l->v[i] != QUOTA_UNSET)
			json_object_set_new(out, quota_limit_name(i), limit_value(i, l->v[i]));
	return out;
}

int api_limits_read(struct http_request *req, json_t *obj, const char *field,
		    struct quota_limits *out)
{
	json_t *limits = json_object_get(obj, field), *v;
	const char *key;

	quota_limits_clear(out);
	if (!limits || json_is_null(limits))
		return 0;
	if (!json_is_object(limits)) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "field \"%s\" must be an object of limits", field);
		return -1;
	}
	json_object_foreach(limits, key, v) {
		int which = quota_limit_parse(key);
		if (which < 0) {
			http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
					 "field \"%s.%.64s\" is not a limit (docs/api.md lists them)",
					 field, key);
			return -1;
		}
		if (json_is_null(v))
			continue; /* not set: inherited */
		if (which == QL_NETWORK) {
			if (network_value(v, &out->v[which]) < 0) {
				http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
						 "field \"%s.network\" must be \"none\", \"egress\" or null",
						 field);
				return -1;
			}
			continue;
		}
		if (json_is_string(v) && !strcmp(json_string_value(v), "unlimited")) {
			out->v[which] = QUOTA_UNLIMITED;
			continue;
		}
		if (!json_is_integer(v) || !quota_value_ok(which, json_integer_value(v)) ||
		    json_integer_value(v) == QUOTA_UNLIMITED) {
			http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
					 "field \"%s.%s\" must be a whole number in range,"
					 " \"unlimited\" or null",
					 field, key);
			return -1;
		}
		out->v[which] = json_integer_value(v);
	}
	return 0;
}

/* {limit: {"value", "source", ["plan"], ["group"]}}; value null = unlimited. */
static json_t *effective_json(const struct quota_effective *e)
{
	json_t *out = json_object();

	for (int i = 0; i < QL_COUNT; i++) {
		json_t *value = i == QL_NETWORK ? limit_value(i, e->v[i])
				: e->v[i] == QUOTA_UNLIMITED ? json_null() : json_integer(e->v[i]);
		json_t *one = json_pack("{s:o,s:s}", "value", value, "source",
					quota_source_name(e->from[i].source));
		if (e->from[i].plan[0])
			json_object_set_new(one, "plan", json_string(e->from[i].plan));
		if (e->from[i].group[0])
			json_object_set_new(one, "group", json_string(e->from[i].group));
		json_object_set_new(out, quota_limit_name(i), one);
	}
	return out;
}

static int effective(struct http_request *req, int64_t user_id, struct quota_effective *e)
{
	struct quota_limits defaults;

	user_quotas_defaults(http_app(req)->cfg, &defaults);
	if (user_quotas_effective(http_app(req)->db, user_id, &defaults, e) < 0) {
		http_reply_internal(req);
		return -1;
	}
	return 0;
}

void api_me_quota(struct http_request *req)
{
	const struct user *u = &http_identity(req)->user;
	struct quota_effective e;

	if (effective(req, u->id, &e) < 0)
		return;
	json_t *out = json_pack("{s:s,s:o}", "user", u->name, "limits", effective_json(&e));
	if (api_quota_use_json(req, u->id, out) < 0 ||
	    api_job_storage_json(req, u->id, e.v[QL_JOB_STORAGE_BYTES], out) < 0) {
		json_decref(out);
		return;
	}
	api_storage_json(req, u->name, u->id, out);
	http_reply_json(req, MHD_HTTP_OK, out);
}

static int append_name(const char *name, void *ctx)
{
	json_array_append_new(ctx, json_string(name));
	return 0;
}

/* The admin view of u's quota: plan, overrides, groups and the result. */
static json_t *user_quota_json(struct http_request *req, const struct user *u)
{
	struct db *db = http_app(req)->db;
	char plan[QUOTA_NAME_MAX + 1];
	struct quota_limits overrides;
	struct quota_effective e;
	json_t *groups = json_array();

	if (user_quotas_get(db, u->id, plan, &overrides) < 0 ||
	    groups_of_user_each(db, u->id, append_name, groups) < 0 || effective(req, u->id, &e) < 0) {
		json_decref(groups);
		if (!http_has_reply(req))
			http_reply_internal(req);
		return NULL;
	}
	json_t *out = json_pack("{s:s,s:o,s:o,s:o,s:o}", "user", u->name, "plan",
				plan[0] ? json_string(plan) : json_null(), "overrides",
				api_limits_json(&overrides), "groups", groups, "limits",
				effective_json(&e));
	if (api_quota_use_json(req, u->id, out) < 0 ||
	    api_job_storage_json(req, u->id, e.v[QL_JOB_STORAGE_BYTES], out) < 0) {
		json_decref(out);
		return NULL;
	}
	api_storage_json(req, u->name, u->id, out);
	return out;
}

void api_user_quota_get(struct http_request *req)
{
	struct user u;
	json_t *out;

	if (api_path_user(req, &u) < 0 || !(out = user_quota_json(req, &u)))
		return;
	http_reply_json(req, MHD_HTTP_OK, out);
}

/* Reads "plan" (a name or null): 1 present, 0 absent, -1 reply set. */
int api_plan_field(struct http_request *req, json_t *body, const char **plan)
{
	json_t *v = json_object_get(body, "plan");

	*plan = NULL;
	if (!v)
		return 0;
	if (json_is_null(v))
		return 1;
	if (!json_is_string(v) || !parse_user_name_ok(json_string_value(v))) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "field \"plan\" must be a plan name or null");
		return -1;
	}
	*plan = json_string_value(v);
	return 1;
}

void api_user_quota_put(struct http_request *req)
{
	struct app *app = http_app(req);
	static const char *const fields[] = {"plan", "overrides", NULL};
	const char *plan;
	struct quota_limits overrides, old_overrides;
	char detail[1100], text[1024], old_plan[QUOTA_NAME_MAX + 1];
	int64_t storage_before = 0, storage_after = 0;
	const char *applied;
	struct user u;
	json_t *body = api_body(req, fields), *out;
	int has_plan;
	enum quota_change_result rc;

	if (!body)
		return;
	if (api_path_user(req, &u) < 0 || (has_plan = api_plan_field(req, body, &plan)) < 0 ||
	    api_limits_read(req, body, "overrides", &overrides) < 0)
		goto out;
	bool has_overrides = json_object_get(body, "overrides") != NULL;
	/* what to put back when the new storage quota is refused */
	if (user_quotas_get(app->db, u.id, old_plan, &old_overrides) < 0 ||
	    (storage_before = api_storage_quota(req, u.id)) == QUOTA_UNSET) {
		http_reply_internal(req);
		goto out;
	}
	rc = user_quotas_set(app->db, u.id, has_plan, plan, has_overrides ? &overrides : NULL,
			     time(NULL));
	if (rc == QUOTA_NO_PLAN) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "field \"plan\": no plan named \"%s\"", plan);
		goto out;
	}
	if (rc != QUOTA_OK || (storage_after = api_storage_quota(req, u.id)) == QUOTA_UNSET) {
		http_reply_internal(req);
		goto out;
	}
	if (api_storage_check(req, u.name, u.id, storage_before, storage_after) != API_STORAGE_OK) {
		if (user_quotas_set(app->db, u.id, true, old_plan[0] ? old_plan : NULL,
				    &old_overrides, time(NULL)) != QUOTA_OK)
			log_error("quota of %s: the refused change could not be undone", u.name);
		goto out;
	}
	quota_limits_format(&overrides, text, sizeof(text));
	snprintf(detail, sizeof(detail), "%s%s%s%s%s", has_plan ? "plan=" : "",
		 has_plan ? (plan ? plan : "none") : "", has_plan && has_overrides ? " " : "",
		 has_overrides ? "overrides: " : "", has_overrides ? text : "");
	if (audit_add(app->db, time(NULL), http_identity(req)->user.name, "quota.update", u.name,
		      http_address(req), detail) < 0)
		log_error("audit: quota.update of %s not recorded", u.name);
	applied = api_storage_apply(req, u.name, u.id, storage_before, storage_after);
	if ((out = user_quota_json(req, &u))) {
		if (applied)
			json_object_set_new(json_object_get(out, "storage"), "applied",
					    json_string(applied));
		http_reply_json(req, MHD_HTTP_OK, out);
	}
out:
	json_decref(body);
}
