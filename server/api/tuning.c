/* tuning.c - tuning jobs: POST /api/v1/tuning-jobs, GET /api/v1/tuning-jobs,
 * GET /api/v1/tuning-jobs/{id}, POST /api/v1/tuning-jobs/{id}/stop and the
 * page GET /tuning/{id} (docs/jobs.md "Tuning jobs"). Access as for jobs: a
 * user sees and stops their own; an administrator holding admin:jobs any. */
#include "api/tuning.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "api/api.h"
#include "auth/scope.h"
#include "http/http.h"
#include "http/static.h"
#include "labd/app.h"
#include "labd/parse.h"
#include "tuning/search.h"
#include "tuning/tuner.h"

#define LIST_LIMIT_DEFAULT 50
#define LIST_LIMIT_MAX 200

/* The tuning job named by the path that the caller may see: 0 with *t, or
 * -1 with the reply set (404 for another user's). */
static int path_tuning(struct http_request *req, struct tuning_job *t)
{
	const char *text = http_match(req)->params[0];
	uint64_t id;
	int rc;

	if (parse_uint(text, 1, INT64_MAX, &id) < 0) {
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no tuning job %.32s", text);
		return -1;
	}
	rc = tuning_find_for(http_app(req)->db,
			     api_admin_reach(req, SCOPE_ADMIN_JOBS) ? 0 : http_identity(req)->user.id,
			     (int64_t)id, t);
	if (rc < 0)
		http_reply_internal(req);
	else if (rc == 0)
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no tuning job %llu",
				 (unsigned long long)id);
	return rc == 1 ? 0 : -1;
}

/* Replies with the tuning job id (full view). */
static void reply_tuning(struct http_request *req, unsigned status, int64_t id)
{
	struct app *app = http_app(req);
	struct tuning_job t;
	json_t *v;

	if (tuning_find_for(app->db, 0, id, &t) != 1) {
		http_reply_internal(req);
		return;
	}
	v = tuner_json(app, &t, true);
	tuning_row_free(&t);
	if (v)
		http_reply_json(req, status, v);
	else
		http_reply_internal(req);
}

void api_tuning_create(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	struct app *app = http_app(req);
	struct jobs_refusal why;
	int64_t id = 0;
	json_t *body = api_body(req, search_fields);

	if (!body)
		return;
	switch (tuner_create(app, ident->user.id, ident->user.name, http_address(req), body, &id,
			     &why)) {
	case JOBS_SUBMIT_OK:
		reply_tuning(req, MHD_HTTP_CREATED, id);
		break;
	case JOBS_SUBMIT_INVALID:
		api_reply_field(req, why.err.field, "%s", why.err.message);
		break;
	case JOBS_SUBMIT_EXISTS:
		http_reply_error(req, MHD_HTTP_CONFLICT, "tuning_job_exists",
				 "you already have a tuning job named \"%s\"; names are unique per "
				 "user",
				 json_string_value(json_object_get(body, "name")));
		break;
	case JOBS_SUBMIT_QUOTA:
		api_reply_quota_exceeded_status(req, MHD_HTTP_TOO_MANY_REQUESTS, &why.window);
		break;
	default:
		http_reply_internal(req);
		break;
	}
	json_decref(body);
}

struct tuning_list_walk {
	struct app *app;
	json_t *items;
};

static int add_tuning(const struct tuning_job *t, void *ctx)
{
	struct tuning_list_walk *w = ctx;
	json_t *v = tuner_json(w->app, t, false);

	if (v)
		json_array_append_new(w->items, v);
	return 0;
}

void api_tuning_list(struct http_request *req)
{
	struct app *app = http_app(req);
	uint64_t limit = LIST_LIMIT_DEFAULT, offset = 0;
	struct tuning_list_walk w = {app, json_array()};
	int64_t user_id = 0, total = 0;

	if (api_query_uint(req, "limit", 1, LIST_LIMIT_MAX, &limit) < 0 ||
	    api_query_uint(req, "offset", 0, INT32_MAX, &offset) < 0 ||
	    api_list_owner(req, "tuning jobs", SCOPE_ADMIN_JOBS, &user_id) < 0)
		goto out;
	if (tuning_list(app->db, user_id, (int64_t)limit, (int64_t)offset, add_tuning, &w,
			&total) < 0) {
		http_reply_internal(req);
		goto out;
	}
	http_reply_json(req, MHD_HTTP_OK,
			json_pack("{s:O,s:I}", "tuning_jobs", w.items, "total", (json_int_t)total));
out:
	json_decref(w.items);
}

void api_tuning_get(struct http_request *req)
{
	struct tuning_job t;
	json_t *v;

	if (path_tuning(req, &t) < 0)
		return;
	v = tuner_json(http_app(req), &t, true);
	tuning_row_free(&t);
	if (v)
		http_reply_json(req, MHD_HTTP_OK, v);
	else
		http_reply_internal(req);
}

void api_tuning_stop(struct http_request *req)
{
	static const char *const no_fields[] = {NULL};
	struct tuning_job t;
	size_t len = 0;
	json_t *body;
	int rc;

	/* no body, or an empty object (what the browser's helper sends) */
	http_body(req, &len);
	if (len > 0) {
		if (!(body = api_body(req, no_fields)))
			return;
		json_decref(body);
	}
	if (path_tuning(req, &t) < 0)
		return;
	rc = tuner_stop_job(http_app(req), &t, http_identity(req)->user.name);
	if (rc == -EALREADY)
		http_reply_error(req, MHD_HTTP_CONFLICT, "tuning_job_not_running",
				 "the tuning job is not in progress (it ended or is stopping "
				 "already)");
	else if (rc < 0)
		http_reply_internal(req);
	else
		reply_tuning(req, MHD_HTTP_ACCEPTED, t.id);
	tuning_row_free(&t);
}

void api_tuning_page(struct http_request *req)
{
	static_serve_html(req, MHD_HTTP_OK, "tuning.html");
}
