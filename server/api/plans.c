/* plans.c - admin management of plans: list, create, show, replace limits, delete. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "config/config.h"
#include "config/images.h"
#include "http/http.h"
#include "labd/app.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "store/audit.h"
#include "store/plans.h"

static json_t *plan_json(const struct plan *p)
{
	char created[21], updated[21];

	api_time(p->created_at, created);
	api_time(p->updated_at, updated);
	return json_pack("{s:s,s:o,s:s,s:f,s:s,s:s,s:s}", "name", p->name, "limits",
			 api_limits_json(&p->limits), "image", p->image, "preemptible_rate",
			 p->preemptible_rate, "gpu", p->gpu, "created_at", created, "updated_at",
			 updated);
}

static int append_plan(const struct plan *p, void *ctx)
{
	json_array_append_new(ctx, plan_json(p));
	return 0;
}

void api_plans_list(struct http_request *req)
{
	json_t *list = json_array();

	if (plans_each(http_app(req)->db, append_plan, list) < 0) {
		json_decref(list);
		http_reply_internal(req);
		return;
	}
	http_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "plans", list));
}

static void audit_plan(struct http_request *req, const char *action, const char *name,
		       const struct quota_limits *limits, const char *image, const char *gpu)
{
	char text[1024] = "";
	size_t used;

	if (limits)
		quota_limits_format(limits, text, sizeof(text));
	used = strlen(text);
	if (limits && image && image[0]) /* a plan's image is part of what it gives */
		snprintf(text + used, sizeof(text) - used, "%simage=%s", used ? " " : "", image);
	used = strlen(text);
	if (limits && gpu && strcmp(gpu, PLAN_GPU_WHOLE) != 0) /* so is a kind of GPU device */
		snprintf(text + used, sizeof(text) - used, "%sgpu=%s", used ? " " : "", gpu);
	if (audit_add(http_app(req)->db, time(NULL), http_identity(req)->user.name, action, name,
		      http_address(req), limits ? text : NULL) < 0)
		log_error("audit: %s of %s not recorded", action, name);
}

/* The body's "image": 0 with *out set (keep when absent), or -1 with the reply set.
 * Only names in [images] are accepted: a folder is root's to choose, never a client's. */
static int read_image(struct http_request *req, json_t *body, const char **out)
{
	int rc = api_string(req, body, "image", out);

	if (rc <= 0)
		return rc;
	if ((*out)[0] && !images_folder(http_app(req)->cfg, *out)) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "field \"image\" must be \"\" (the host's root) or an image named "
				 "in [images] (GET /api/v1/images lists them)");
		return -1;
	}
	return 0;
}

/* The body's "preemptible_rate": 1 with *out set, 0 when absent, or -1 with
 * the reply set. The fraction of a preemptible job's second the plan bills. */
static int read_rate(struct http_request *req, json_t *body, double *out)
{
	json_t *v = json_object_get(body, "preemptible_rate");

	if (!v)
		return 0;
	if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 1) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "field \"preemptible_rate\" must be a number from 0 to 1 (the "
				 "fraction of a preemptible job's second the plan bills)");
		return -1;
	}
	*out = json_number_value(v);
	return 1;
}

/* The body's "gpu": 1 with *out set, 0 when absent, or -1 with the reply set.
 * The kind of GPU device the plan's GPU runtimes and jobs get. */
static int read_gpu(struct http_request *req, json_t *body, const char **out)
{
	json_t *v = json_object_get(body, "gpu");

	if (!v)
		return 0;
	if (!json_is_string(v) || !plans_gpu_ok(json_string_value(v))) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "field \"gpu\" must be " PLAN_GPU_RULE
				 " (the kind of GPU device the plan's GPU runtimes and jobs get)");
		return -1;
	}
	*out = json_string_value(v);
	return 1;
}

/* Stores the kind read (NULL: none) and re-reads the plan. 0 or -1. */
static int apply_gpu(struct http_request *req, const char *gpu, struct plan *p)
{
	if (!gpu)
		return 0;
	if (plans_set_gpu(http_app(req)->db, p->name, gpu) != QUOTA_OK ||
	    plans_find(http_app(req)->db, p->name, p) != 1) {
		http_reply_internal(req);
		return -1;
	}
	return 0;
}

/* Stores the rate read (has: read_rate's answer) and re-reads the plan. 0 or -1. */
static int apply_rate(struct http_request *req, int has, double rate, struct plan *p)
{
	if (has != 1)
		return 0;
	if (plans_set_preemptible_rate(http_app(req)->db, p->name, rate) != QUOTA_OK ||
	    plans_find(http_app(req)->db, p->name, p) != 1) {
		http_reply_internal(req);
		return -1;
	}
	return 0;
}

void api_plans_create(struct http_request *req)
{
	static const char *const fields[] = {"name", "limits", "image", "preemptible_rate", "gpu",
					     NULL};
	double rate = 0;
	int has_rate = 0;
	const char *name = NULL, *image = "", *gpu = NULL;
	struct quota_limits limits;
	struct plan p;
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
	if (api_limits_read(req, body, "limits", &limits) < 0 || read_image(req, body, &image) < 0 ||
	    (has_rate = read_rate(req, body, &rate)) < 0 || read_gpu(req, body, &gpu) < 0)
		goto out;
	rc = plans_create(http_app(req)->db, name, &limits, image, time(NULL), &p);
	if (rc == QUOTA_CONFLICT)
		http_reply_error(req, MHD_HTTP_CONFLICT, "conflict", "plan \"%s\" already exists",
				 name);
	else if (rc != QUOTA_OK)
		http_reply_internal(req);
	if (rc != QUOTA_OK || apply_rate(req, has_rate, rate, &p) < 0 || apply_gpu(req, gpu, &p) < 0)
		goto out;
	audit_plan(req, "plan.create", name, &limits, image, p.gpu);
	http_reply_json(req, MHD_HTTP_CREATED, json_pack("{s:o}", "plan", plan_json(&p)));
out:
	json_decref(body);
}

/* The plan named in the path: 0, or -1 with the reply set. */
static int path_plan(struct http_request *req, struct plan *p)
{
	const char *name = api_path_name(req);
	return api_path_found(req, "plan", name ? plans_find(http_app(req)->db, name, p) : 0);
}

void api_plans_get(struct http_request *req)
{
	struct plan p;

	if (path_plan(req, &p) == 0)
		http_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "plan", plan_json(&p)));
}

void api_plans_put(struct http_request *req)
{
	static const char *const fields[] = {"limits", "image", "preemptible_rate", "gpu", NULL};
	const char *image = NULL, *gpu = NULL;
	double rate = 0;
	int has_rate = 0;
	struct quota_limits limits;
	struct api_storage_snapshot snap = {0};
	struct plan p;
	json_t *body = api_body(req, fields);
	enum quota_change_result rc;

	if (!body)
		return;
	if (path_plan(req, &p) < 0)
		goto out;
	if (!json_object_get(body, "limits")) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "field \"limits\" is required (the plan's whole set of limits)");
		goto out;
	}
	if (api_limits_read(req, body, "limits", &limits) < 0 || read_image(req, body, &image) < 0 ||
	    (has_rate = read_rate(req, body, &rate)) < 0 || read_gpu(req, body, &gpu) < 0 ||
	    api_storage_snapshot(req, &snap) < 0)
		goto out;
	rc = plans_update(http_app(req)->db, p.name, &limits, image ? image : p.image, time(NULL));
	if (rc != QUOTA_OK) {
		http_reply_internal(req);
		goto out;
	}
	/* a member's home must still fit: else the plan goes back as it was */
	if (api_storage_recheck(req, &snap) != API_STORAGE_OK) {
		if (plans_update(http_app(req)->db, p.name, &p.limits, p.image, time(NULL)) != QUOTA_OK)
			log_error("plan %s: the refused change could not be undone", p.name);
		goto out;
	}
	if (plans_find(http_app(req)->db, p.name, &p) != 1) {
		http_reply_internal(req);
		goto out;
	}
	if (apply_rate(req, has_rate, rate, &p) < 0 || apply_gpu(req, gpu, &p) < 0)
		goto out;
	audit_plan(req, "plan.update", p.name, &limits, p.image, p.gpu);
	api_storage_apply_all(req, &snap);
	http_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "plan", plan_json(&p)));
out:
	api_storage_snapshot_release(&snap);
	json_decref(body);
}

void api_plans_delete(struct http_request *req)
{
	char who[512];
	struct plan p;
	enum quota_change_result rc;

	if (path_plan(req, &p) < 0)
		return;
	rc = plans_delete(http_app(req)->db, p.name, who, sizeof(who));
	if (rc == QUOTA_IN_USE)
		http_reply_error(req, MHD_HTTP_CONFLICT, "plan_in_use",
				 "plan \"%s\" is in use by %s", p.name, who);
	else if (rc == QUOTA_NOT_FOUND)
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no plan named \"%s\"",
				 p.name);
	else if (rc != QUOTA_OK)
		http_reply_internal(req);
	if (rc != QUOTA_OK)
		return;
	audit_plan(req, "plan.delete", p.name, NULL, NULL, NULL);
	http_reply_empty(req, MHD_HTTP_NO_CONTENT);
}
