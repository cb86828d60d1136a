/* groups.c - admin management of groups: list, create, show, change plan and
 * members, delete. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "http/http.h"
#include "labd/app.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "store/audit.h"
#include "store/groups.h"

static int append_name(const char *name, void *ctx)
{
	json_array_append_new(ctx, json_string(name));
	return 0;
}

/* NULL on a store error. */
static json_t *group_json(struct http_request *req, const struct group *g)
{
	char created[21], expires[21];
	json_t *members = json_array();

	if (groups_members_each(http_app(req)->db, g->id, append_name, members) < 0) {
		json_decref(members);
		return NULL;
	}
	api_time(g->created_at, created);
	api_time(g->expires_at, expires);
	return json_pack("{s:s,s:o,s:o,s:s,s:o,s:b}", "name", g->name, "plan",
			 g->plan[0] ? json_string(g->plan) : json_null(), "members", members,
			 "created_at", created, "expires_at",
			 g->expires_at ? json_string(expires) : json_null(), "ended",
			 g->ended_at != 0);
}

struct list_ctx {
	struct http_request *req;
	json_t *list;
};

static int append_group(const struct group *g, void *arg)
{
	struct list_ctx *c = arg;
	json_t *one = group_json(c->req, g);

	if (!one)
		return 1;
	json_array_append_new(c->list, one);
	return 0;
}

void api_groups_list(struct http_request *req)
{
	struct list_ctx c = {req, json_array()};

	if (groups_each(http_app(req)->db, append_group, &c) < 0) {
		json_decref(c.list);
		http_reply_internal(req);
		return;
	}
	http_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "groups", c.list));
}

/* Reads an optional array of user names into names[]: 0, or -1 with the reply set. */
static int read_names(struct http_request *req, json_t *body, const char *field,
		      const char *names[GROUPS_MAX_NAMES], size_t *n)
{
	json_t *arr = json_object_get(body, field), *v;
	size_t i;

	*n = 0;
	if (!arr)
		return 0;
	if (!json_is_array(arr) || json_array_size(arr) > GROUPS_MAX_NAMES) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "field \"%s\" must be an array of at most %d user names", field,
				 GROUPS_MAX_NAMES);
		return -1;
	}
	json_array_foreach(arr, i, v) {
		if (!json_is_string(v) || !parse_user_name_ok(json_string_value(v))) {
			http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
					 "field \"%s\"[%zu] must be a user name", field, i);
			return -1;
		}
		names[(*n)++] = json_string_value(v);
	}
	return 0;
}

/* "2026-07-31T23:59:59Z" (as the API writes times) or "2026-07-31" (its
 * start, UTC) into *t: 0, or -1. */
static int parse_utc(const char *text, int64_t *t)
{
	struct tm tm = {0};
	const char *end = strptime(text, "%Y-%m-%d", &tm);

	if (end && *end == 'T')
		end = strptime(end, "T%H:%M:%SZ", &tm);
	if (!end || *end || strlen(text) > 20)
		return -1;
	*t = (int64_t)timegm(&tm);
	return *t > 0 ? 0 : -1;
}

/* Reads the optional "expires_at" (a time, or null for never): 0, or -1
 * with the reply set. */
static int read_expires(struct http_request *req, json_t *body, struct group_change *c)
{
	json_t *v = json_object_get(body, "expires_at");

	c->set_expires = v != NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v) || parse_utc(json_string_value(v), &c->expires_at) < 0) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "field \"expires_at\" must be a UTC time (\"2026-07-31T23:59:59Z\"),"
				 " a date (\"2026-07-31\") or null");
		return -1;
	}
	return 0;
}

/* Reads plan and member changes: 0, or -1 with the reply set. */
static int read_change(struct http_request *req, json_t *body, const char *add_field,
		       const char *add[GROUPS_MAX_NAMES], const char *remove[GROUPS_MAX_NAMES],
		       struct group_change *c)
{
	int has_plan = api_plan_field(req, body, &c->plan);

	if (has_plan < 0 || read_expires(req, body, c) < 0 ||
	    read_names(req, body, add_field, add, &c->n_add) < 0 ||
	    read_names(req, body, "remove_members", remove, &c->n_remove) < 0)
		return -1;
	c->set_plan = has_plan == 1;
	c->add = add;
	c->remove = remove;
	return 0;
}

/* Replies to a failed change; false when rc is QUOTA_OK. */
static bool reply_failed(struct http_request *req, enum quota_change_result rc,
			 const char *name, const char *missing)
{
	if (rc == QUOTA_CONFLICT)
		http_reply_error(req, MHD_HTTP_CONFLICT, "conflict", "group \"%s\" already exists",
				 name);
	else if (rc == QUOTA_NO_PLAN)
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "field \"plan\": no plan named \"%s\"", missing);
	else if (rc == QUOTA_NO_USER)
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "members: no user named \"%s\"", missing);
	else if (rc == QUOTA_NOT_FOUND)
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no group named \"%s\"",
				 name);
	else if (rc != QUOTA_OK)
		http_reply_internal(req);
	return rc != QUOTA_OK;
}

static void audit_group(struct http_request *req, const char *action, const char *name,
			const struct group_change *c)
{
	char detail[160] = "";

	if (c)
		snprintf(detail, sizeof(detail), "%s%s%s+%zu -%zu members",
			 c->set_plan ? "plan=" : "", c->set_plan ? (c->plan ? c->plan : "none") : "",
			 c->set_plan ? " " : "", c->n_add, c->n_remove);
	if (audit_add(http_app(req)->db, time(NULL), http_identity(req)->user.name, action, name,
		      http_address(req), c ? detail : NULL) < 0)
		log_error("audit: %s of %s not recorded", action, name);
}

/* Answers with the group as it is now, and (when not NULL, taken) what a
 * change did to the members' homes. */
static void reply_group(struct http_request *req, const char *name, unsigned status,
			json_t *storage)
{
	struct group g;
	json_t *one, *out;

	if (groups_find(http_app(req)->db, name, &g) != 1 || !(one = group_json(req, &g))) {
		json_decref(storage);
		http_reply_internal(req);
		return;
	}
	out = json_pack("{s:o}", "group", one);
	if (storage)
		json_object_set_new(out, "storage", storage);
	http_reply_json(req, status, out);
}

/* ---- storage: a group change may lower or raise its members' storage ---- */

static int has_name(json_t *names, const char *name)
{
	size_t i;
	json_t *v;

	json_array_foreach(names, i, v) {
		if (strcmp(json_string_value(v), name) == 0)
			return 1;
	}
	return 0;
}

/* Puts group g back as it was before c (old_members: its members then): the
 * plan it had, the members c added taken out, those c removed put back. */
static void undo_update(struct http_request *req, const struct group *g, json_t *old_members,
			const struct group_change *c)
{
	const char *back[GROUPS_MAX_NAMES], *drop[GROUPS_MAX_NAMES];
	char missing[QUOTA_NAME_MAX + 1] = "";
	struct group_change u = {.set_plan = c->set_plan,
				 .plan = g->plan[0] ? g->plan : NULL,
				 .set_expires = c->set_expires,
				 .expires_at = g->expires_at,
				 .add = back,
				 .remove = drop};

	for (size_t i = 0; i < c->n_remove; i++)
		if (has_name(old_members, c->remove[i]))
			back[u.n_add++] = c->remove[i];
	for (size_t i = 0; i < c->n_add; i++)
		if (!has_name(old_members, c->add[i]))
			drop[u.n_remove++] = c->add[i];
	if (groups_update(http_app(req)->db, g->name, &u, missing) != QUOTA_OK)
		log_error("group %s: the refused change could not be undone", g->name);
}

/* The members of g now as a JSON array of names; NULL with a 500 reply. */
static json_t *members_now(struct http_request *req, const struct group *g)
{
	json_t *names = json_array();

	if (groups_members_each(http_app(req)->db, g->id, append_name, names) < 0) {
		json_decref(names);
		http_reply_internal(req);
		return NULL;
	}
	return names;
}

void api_groups_create(struct http_request *req)
{
	static const char *const fields[] = {"name", "plan", "members", "expires_at", NULL};
	const char *name = NULL, *add[GROUPS_MAX_NAMES], *remove[GROUPS_MAX_NAMES];
	char missing[QUOTA_NAME_MAX + 1] = "";
	struct group_change c = {0};
	struct api_storage_snapshot snap = {0};
	json_t *body = api_body(req, fields);
	enum quota_change_result rc;

	if (!body)
		return;
	if (api_string(req, body, "name", &name) != 1 || !parse_user_name_ok(name)) {
		if (!http_has_reply(req))
			http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
					 "field \"name\" must match " PARSE_USER_NAME_RULE);
		goto out;
	}
	if (read_change(req, body, "members", add, remove, &c) < 0)
		goto out;
	if (api_storage_snapshot(req, &snap) < 0)
		goto out;
	rc = groups_create(http_app(req)->db, name, &c, time(NULL), missing);
	if (reply_failed(req, rc, name, missing))
		goto out;
	/* a member's home must still fit the group's plan: else no group */
	if (api_storage_recheck(req, &snap) != API_STORAGE_OK) {
		if (groups_delete(http_app(req)->db, name) != QUOTA_OK)
			log_error("group %s: the refused creation could not be undone", name);
		goto out;
	}
	audit_group(req, "group.create", name, &c);
	reply_group(req, name, MHD_HTTP_CREATED, api_storage_apply_report(req, &snap));
out:
	api_storage_snapshot_release(&snap);
	json_decref(body);
}

/* The group named in the path: 0, or -1 with the reply set. */
static int path_group(struct http_request *req, struct group *g)
{
	const char *name = api_path_name(req);
	return api_path_found(req, "group", name ? groups_find(http_app(req)->db, name, g) : 0);
}

void api_groups_get(struct http_request *req)
{
	struct group g;

	if (path_group(req, &g) == 0)
		reply_group(req, g.name, MHD_HTTP_OK, NULL);
}

void api_groups_put(struct http_request *req)
{
	static const char *const fields[] = {"plan", "add_members", "remove_members", "expires_at",
					     NULL};
	const char *add[GROUPS_MAX_NAMES], *remove[GROUPS_MAX_NAMES];
	char missing[QUOTA_NAME_MAX + 1] = "";
	struct group_change c = {0};
	struct api_storage_snapshot snap = {0};
	struct group g;
	json_t *body = api_body(req, fields), *old_members = NULL;

	if (!body)
		return;
	if (path_group(req, &g) < 0 || read_change(req, body, "add_members", add, remove, &c) < 0 ||
	    !(old_members = members_now(req, &g)) || api_storage_snapshot(req, &snap) < 0)
		goto out;
	if (reply_failed(req, groups_update(http_app(req)->db, g.name, &c, missing), g.name,
			 missing))
		goto out;
	/* every member's home (those added, removed, or under a changed plan)
	 * must still fit: else the group goes back as it was */
	if (api_storage_recheck(req, &snap) != API_STORAGE_OK) {
		undo_update(req, &g, old_members, &c);
		goto out;
	}
	audit_group(req, "group.update", g.name, &c);
	reply_group(req, g.name, MHD_HTTP_OK, api_storage_apply_report(req, &snap));
out:
	api_storage_snapshot_release(&snap);
	json_decref(old_members);
	json_decref(body);
}

void api_groups_delete(struct http_request *req)
{
	struct group g;

	if (path_group(req, &g) < 0 ||
	    reply_failed(req, groups_delete(http_app(req)->db, g.name), g.name, ""))
		return;
	audit_group(req, "group.delete", g.name, NULL);
	http_reply_empty(req, MHD_HTTP_NO_CONTENT);
}
