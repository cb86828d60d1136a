/* runtime.c - the user's interactive runtime: start, show, stop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "labd/app.h"
#include "config/capacity.h"
#include "config/config.h"
#include "store/audit.h"
#include "store/db.h"
#include "http/http.h"
#include "runtime/runtime.h"
#include "labd/log.h"
#include "store/runtimes.h"

/* null, or while queued its place: {"position", "queued_at",
 * "estimate_at" (null when none), "expires_at"}. */
static json_t *queue_json(const struct runtime *r)
{
	char queued[21], estimate[21], expires[21];

	if (r->state != RUNTIME_QUEUED)
		return json_null();
	api_time(r->queued_at, queued);
	api_time(r->queue_estimate_at, estimate);
	api_time(r->queue_expires_at, expires);
	return json_pack("{s:i,s:s,s:o,s:s}", "position", r->queue_position, "queued_at", queued,
			 "estimate_start_at",
			 r->queue_estimate_at ? json_string(estimate) : json_null(), "expires_at",
			 expires);
}

json_t *api_runtime_json(const struct runtime *r, const struct labd_config *cfg)
{
	char created[21], ready[21], deadline[21], ended[21], url[64];
	int64_t now = time(NULL), left = r->deadline - now;
	json_t *j;

	/* A queued runtime's clock has not started: it will have all its length. */
	if (r->state == RUNTIME_QUEUED)
		left = r->deadline - r->created_at;
	json_t *gpus = json_array(), *warn = json_array();
	char copy[RUNTIME_GPUS_MAX], *save = NULL;

	snprintf(copy, sizeof(copy), "%s", r->gpus);
	for (char *g = strtok_r(copy, ",", &save); g; g = strtok_r(NULL, ",", &save))
		json_array_append_new(gpus, json_integer(strtol(g, NULL, 10)));
	for (unsigned i = 0; i < cfg->n_warn_before; i++)
		json_array_append_new(warn, json_integer(cfg->warn_before_s[i]));
	api_time(r->created_at, created);
	api_time(r->ready_at, ready);
	api_time(r->deadline, deadline);
	api_time(r->ended_at, ended);
	snprintf(url, sizeof(url), "/user/%s/", r->user_name);
	j = json_pack("{s:I,s:s,s:s,s:s?,s:s,s:o,s:s,s:I,s:o,s:o,s:s,s:o}", "id",
			 (json_int_t)r->id, "type", runtimes_kind_name(r->kind), "state",
			 runtimes_state_name(r->state), "reason", r->reason[0] ? r->reason : NULL,
			 "started_at", created, "ready_at",
			 r->ready_at ? json_string(ready) : json_null(), "deadline", deadline,
			 "seconds_left",
			 (json_int_t)(runtimes_state_live(r->state) && left > 0 ? left : 0), "ended_at",
			 r->ended_at ? json_string(ended) : json_null(), "gpus", gpus, "url", url,
			 "warn_before", warn);
	if (j)
		json_object_set_new(j, "queue", queue_json(r));
	/* the image it runs on and that image's hash; null: the host's root */
	if (j)
		json_object_update_new(j, json_pack("{s:o,s:o}", "image",
						    r->image[0] ? json_string(r->image) : json_null(),
						    "image_hash", r->image_hash[0]
								      ? json_string(r->image_hash)
								      : json_null()));
	return j;
}

json_t *api_runtime_slurm(json_t *j, const struct runtime *r, struct app *app)
{
	char text[160], estimate[21];
	int64_t at;

	if (!j || !r || r->state != RUNTIME_STARTING ||
	    runtime_backend_queue(app, r->id, text, sizeof(text), &at) < 0)
		return j;
	api_time(at, estimate);
	json_object_set_new(j, "slurm", json_pack("{s:s,s:o}", "reason", text, "estimate_start_at",
						  at ? json_string(estimate) : json_null()));
	return j;
}

json_t *api_runtime_reply(json_t *runtime)
{
	return json_pack("{s:O,s:o}", "runtime", runtime, "session", runtime);
}

void api_runtime_start(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	static const char *const fields[] = {"type", NULL};
	const char *type = NULL;
	enum runtime_kind kind;
	struct app *app = http_app(req);
	struct runtime r;
	json_t *body = api_body(req, fields);

	if (!body)
		return;
	if (api_string(req, body, "type", &type) != 1 || runtimes_kind_parse(type, &kind) < 0) {
		if (!http_has_reply(req))
			http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
					 "field \"type\" must be \"cpu\" or \"gpu\"");
		goto out;
	}
	struct quota_window refusal;
	switch (runtime_start(app, ident->user.id, ident->user.name, http_address(req), kind, &r,
			      &refusal)) {
	case RUNTIME_START_OK:
		http_reply_json(req, MHD_HTTP_ACCEPTED,
				api_runtime_reply(api_runtime_json(&r, app->cfg)));
		break;
	case RUNTIME_START_EXISTS:
		http_reply_error(req, MHD_HTTP_CONFLICT, "runtime_exists",
				 "you already have a runtime; stop it first");
		break;
	case RUNTIME_START_NO_GPU:
		http_reply_error(req, MHD_HTTP_CONFLICT, "no_gpu_available",
				 "this lab has no GPU ([gpu] devices or stand_in); start a CPU "
				 "runtime");
		break;
	case RUNTIME_START_QUOTA:
		api_reply_quota_exceeded(req, &refusal);
		break;
	case RUNTIME_START_NO_GPUS_ALLOWED:
		http_reply_error(req, MHD_HTTP_FORBIDDEN, "quota_exceeded",
				 "your plan allows no GPUs per runtime (gpus_per_runtime is 0); "
				 "start a CPU runtime or ask an admin");
		break;
	case RUNTIME_START_HOST_FULL:
		http_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, "host_full",
				 "this host runs its cap of %u sandboxes ([runtime] max_sandboxes); "
				 "try again when one ends",
				 capacity_max_sandboxes(app->cfg));
		break;
	case RUNTIME_START_GPUS_HELD:
		http_reply_error(req, MHD_HTTP_TOO_MANY_REQUESTS, "gpus_held",
				 "your jobs or warm pools hold GPUs and you may hold %u at once "
				 "([quota] gpus_held); stop the job or release the warm pool "
				 "(DELETE /api/v1/warm-pools/ID), or start a CPU runtime",
				 app->cfg->quota_gpus_held);
		break;
	case RUNTIME_START_ERROR:
		http_reply_internal(req);
		break;
	}
out:
	json_decref(body);
}

void api_runtime_get(struct http_request *req)
{
	struct app *app = http_app(req);
	struct runtime r;
	int rc = runtimes_latest(app->db, http_identity(req)->user.id, &r);

	if (rc < 0) {
		http_reply_internal(req);
		return;
	}
	http_reply_json(req, MHD_HTTP_OK,
			api_runtime_reply(rc ? api_runtime_slurm(api_runtime_json(&r, app->cfg), &r,
								 app)
					     : json_null()));
}

void api_runtime_stop(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	struct app *app = http_app(req);
	struct runtime r;
	int rc = runtimes_live(app->db, ident->user.id, &r);

	if (rc < 0) {
		http_reply_internal(req);
		return;
	}
	if (rc == 0) {
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "no_runtime", "you have no running runtime");
		return;
	}
	const char *reason = r.state == RUNTIME_QUEUED ? "cancelled while queued" : "stopped by the user";
	if (runtime_stop(app, &r, reason) < 0) {
		http_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, "supervisor_unreachable",
				 "the supervisor did not answer; try again");
		return;
	}
	if (audit_add(app->db, time(NULL), ident->user.name, "runtime.stop",
		      ident->user.name, http_address(req), reason) < 0)
		log_error("audit: runtime.stop of %s not recorded", ident->user.name);
	runtimes_latest(app->db, ident->user.id, &r);
	http_reply_json(req, MHD_HTTP_ACCEPTED,
			api_runtime_reply(api_runtime_json(&r, app->cfg)));
}

/* The runtime API lived at /api/v1/me/session until it was named for what it
 * manages. 308 (RFC 9110 section 15.4.9) keeps the method and body, so an old
 * client that follows redirects gets exactly what the new path answers; the old
 * path goes away in the next release. */
void api_runtime_moved(struct http_request *req)
{
	http_add_header(req, "Location", "/api/v1/me/runtime");
	http_reply_error(req, MHD_HTTP_PERMANENT_REDIRECT, "moved",
			 "%s moved to /api/v1/me/runtime and goes away in the next release",
			 http_path(req));
}
