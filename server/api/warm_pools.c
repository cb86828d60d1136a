/* warm_pools.c - GET /api/v1/warm-pools (the caller's job sandboxes kept
 * warm or in use; an administrator's ?user=NAME) and DELETE
 * /api/v1/warm-pools/{id} (release one now). docs/jobs.md "Warm pools". */
#include <errno.h>
#include <time.h>

#include "api/api.h"
#include "auth/scope.h"
#include "http/http.h"
#include "jobs/jobs.h"
#include "labd/app.h"
#include "labd/parse.h"
#include "store/pools.h"
#include "store/users.h"

struct walk {
	json_t *pools;
	int64_t now;
};

static json_t *time_or_null(int64_t t)
{
	char text[21];

	if (t <= 0)
		return json_null();
	api_time(t, text);
	return json_string(text);
}

static int add_pool(const struct pool *p, void *ctx)
{
	struct walk *w = ctx;
	bool available = p->state == POOL_AVAILABLE;

	json_array_append_new(
		w->pools,
		json_pack("{s:I,s:s,s:s,s:o,s:s,s:i,s:s,s:I,s:I,s:o}", "id", (json_int_t)p->id,
			  "status", available ? "Available" : "InUse", "user", p->user_name,
			  "job_id",
			  (available ? p->last_job_id : p->job_id)
				  ? json_integer(available ? p->last_job_id : p->job_id)
				  : json_null(),
			  "type", p->gpu ? "gpu" : "cpu", "gpu_count", p->gpu_count, "image",
			  p->image, "memory_bytes", (json_int_t)p->memory_bytes, "cpus_milli",
			  (json_int_t)p->cpus_milli, "available_until",
			  available ? time_or_null(p->available_until) : json_null()));
	return 0;
}

void api_warm_pools_list(struct http_request *req)
{
	struct walk w = {json_array(), time(NULL)};
	int64_t user_id;

	if (api_list_owner(req, "warm pools", SCOPE_ADMIN_JOBS, &user_id) < 0) {
		json_decref(w.pools);
		return;
	}
	if (pools_each_warm(http_app(req)->db, user_id, add_pool, &w) < 0) {
		json_decref(w.pools);
		http_reply_internal(req);
		return;
	}
	/* warm_s of each from the ledger (outside the walk's lock) */
	for (size_t i = 0; i < json_array_size(w.pools); i++) {
		json_t *p = json_array_get(w.pools, i);
		json_object_set_new(p, "warm_s",
				    json_integer(pools_warm_s(http_app(req)->db,
							      json_integer_value(json_object_get(p, "id")),
							      w.now)));
	}
	http_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "warm_pools", w.pools));
}

void api_warm_pools_delete(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	struct app *app = http_app(req);
	const char *text = http_match(req)->params[0];
	struct pool p;
	uint64_t id;
	int rc = parse_uint(text, 1, INT64_MAX, &id) == 0 ? pools_find(app->db, (int64_t)id, &p) : 0;

	if (rc < 0) {
		http_reply_internal(req);
		return;
	}
	/* another user's pool is not told apart from none */
	if (rc == 0 || (p.user_id != ident->user.id && !api_admin_reach(req, SCOPE_ADMIN_JOBS)) ||
	    p.state == POOL_ENDED) {
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no warm pool %.32s", text);
		return;
	}
	rc = jobs_release_pool(app, &p, "released by the user");
	if (rc == -EBUSY) {
		http_reply_error(req, MHD_HTTP_CONFLICT, "pool_in_use",
				 "warm pool %lld runs a job now; stop the job instead",
				 (long long)p.id);
		return;
	}
	if (rc < 0 && rc != -ETIMEDOUT) {
		http_reply_internal(req);
		return;
	}
	http_reply_empty(req, MHD_HTTP_NO_CONTENT);
}
