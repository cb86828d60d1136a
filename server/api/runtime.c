/* api_session.c - the user's interactive runtime: start, show, stop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "labd/app.h"
#include "store/audit.h"
#include "labd/crypto.h"
#include "store/db.h"
#include "http/http.h"
#include "proto/ipc.h"
#include "labd/log.h"
#include "store/runtimes.h"

json_t *api_runtime_json(const struct runtime *r, const struct labd_config *cfg)
{
	char created[21], ready[21], deadline[21], ended[21], url[64];
	int64_t now = time(NULL), left = r->deadline - now;
	json_t *gpus = json_array(), *warn = json_array();
	char copy[RUNTIME_GPUS_MAX], *save = NULL;

	snprintf(copy, sizeof(copy), "%s", r->gpus);
	for (char *g = strtok_r(copy, ",", &save); g; g = strtok_r(NULL, ",", &save))
		json_array_append_new(gpus, json_integer(strtol(g, NULL, 10)));
	for (unsigned i = 0; i < cfg->n_warn_before; i++)
		json_array_append_new(warn, json_integer(cfg->warn_before[i]));
	api_time(r->created_at, created);
	api_time(r->ready_at, ready);
	api_time(r->deadline, deadline);
	api_time(r->ended_at, ended);
	snprintf(url, sizeof(url), "/user/%s/", r->user_name);
	return json_pack("{s:I,s:s,s:s,s:s?,s:s,s:o,s:s,s:I,s:o,s:o,s:s,s:o}", "id",
			 (json_int_t)r->id, "type", runtimes_kind_name(r->kind), "state",
			 runtimes_state_name(r->state), "reason", r->reason[0] ? r->reason : NULL,
			 "started_at", created, "ready_at",
			 r->ready_at ? json_string(ready) : json_null(), "deadline", deadline,
			 "seconds_left",
			 (json_int_t)(runtimes_state_live(r->state) && left > 0 ? left : 0), "ended_at",
			 r->ended_at ? json_string(ended) : json_null(), "gpus", gpus, "url", url,
			 "warn_before", warn);
}

/* Picks a free GPU from [gpu] devices into out ("3"); -1 when none is free. */
struct gpu_use {
	unsigned used[64];
	int n;
};

static int collect_gpus(const struct runtime *r, void *ctx)
{
	struct gpu_use *u = ctx;
	char copy[RUNTIME_GPUS_MAX], *save = NULL;

	snprintf(copy, sizeof(copy), "%s", r->gpus);
	for (char *g = strtok_r(copy, ",", &save); g && u->n < 64; g = strtok_r(NULL, ",", &save))
		u->used[u->n++] = (unsigned)strtoul(g, NULL, 10);
	return 0;
}

static int pick_gpu(struct app *app, char *out, size_t len)
{
	struct gpu_use u = {.n = 0};

	if (runtimes_each_live(app->db, collect_gpus, &u) < 0)
		return -1;
	for (unsigned i = 0; i < app->cfg->n_gpu_devices; i++) {
		bool busy = false;
		for (int k = 0; k < u.n; k++)
			busy = busy || u.used[k] == app->cfg->gpu_devices[i];
		if (!busy) {
			snprintf(out, len, "%u", app->cfg->gpu_devices[i]);
			return 0;
		}
	}
	return -1;
}

/* Asks the supervisor to build the sandbox; on refusal the row is failed. */
static void ask_supervisor_start(struct http_request *req, struct runtime *r)
{
	json_t *params, *reply = NULL, *gpus = json_array();
	const char *type, *why = NULL;

	if (r->gpus[0])
		json_array_append_new(gpus, json_integer(strtol(r->gpus, NULL, 10)));
	params = json_pack("{s:s,s:I,s:s,s:s,s:I,s:o}", "user", r->user_name, "user_id",
			   (json_int_t)r->user_id, "kind", runtimes_kind_name(r->kind), "token",
			   r->token, "deadline", (json_int_t)r->deadline, "gpus", gpus);
	if (ipc_client_call(req->app->supervisor, "runtime_start", params, &reply) < 0)
		why = "the supervisor did not answer";
	else if (strcmp((type = json_string_value(json_object_get(reply, "type"))) ?: "", "ok"))
		why = json_string_value(json_object_get(reply, "message")) ?: "refused";
	if (why) {
		char reason[RUNTIME_REASON_MAX];
		snprintf(reason, sizeof(reason), "could not start: %s", why);
		runtimes_set_state(req->app->db, r->id, RUNTIME_FAILED, reason, time(NULL));
		log_warn("runtime of %s failed to start: %s", r->user_name, why);
	}
	json_decref(params);
	json_decref(reply);
}

void api_session_start(struct http_request *req)
{
	static const char *const fields[] = {"type", NULL};
	const char *type = NULL;
	enum runtime_kind kind;
	char token[RUNTIME_TOKEN_LEN + 1], gpus[RUNTIME_GPUS_MAX] = "";
	struct app *app = req->app;
	struct runtime r;
	int64_t now = time(NULL);
	json_t *body = api_body(req, fields);
	int rc;

	if (!body)
		return;
	if (api_string(req, body, "type", &type) != 1 || runtimes_kind_parse(type, &kind) < 0) {
		if (!req->response)
			http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
					 "field \"type\" must be \"cpu\" or \"gpu\"");
		goto out;
	}
	if (kind == RUNTIME_GPU && pick_gpu(app, gpus, sizeof(gpus)) < 0) {
		http_reply_error(req, MHD_HTTP_CONFLICT, "no_gpu_available",
				 "no GPU is free right now (%u in this lab); try a CPU runtime or "
				 "later",
				 app->cfg->n_gpu_devices);
		goto out;
	}
	if (crypto_random_token(token, sizeof(token), 32) < 0) {
		api_internal(req);
		goto out;
	}
	rc = runtimes_create(app->db, req->auth.user.id, kind, token, gpus, now,
			     now + (kind == RUNTIME_GPU ? app->cfg->gpu_limit : app->cfg->cpu_limit),
			     &r);
	if (rc == DB_CONFLICT) {
		http_reply_error(req, MHD_HTTP_CONFLICT, "runtime_exists",
				 "you already have a runtime; stop it first");
		goto out;
	}
	if (rc < 0) {
		api_internal(req);
		goto out;
	}
	if (audit_add(app->db, now, req->auth.user.name, "runtime.start", req->auth.user.name,
		      req->address, type) < 0)
		log_error("audit: runtime.start of %s not recorded", req->auth.user.name);
	ask_supervisor_start(req, &r);
	if (runtimes_latest(app->db, req->auth.user.id, &r) != 1) {
		api_internal(req);
		goto out;
	}
	http_reply_json(req, MHD_HTTP_ACCEPTED,
			json_pack("{s:o}", "session", api_runtime_json(&r, app->cfg)));
out:
	json_decref(body);
}

void api_session_get(struct http_request *req)
{
	struct runtime r;
	int rc = runtimes_latest(req->app->db, req->auth.user.id, &r);

	if (rc < 0) {
		api_internal(req);
		return;
	}
	http_reply_json(req, MHD_HTTP_OK,
			json_pack("{s:o}", "session",
				  rc ? api_runtime_json(&r, req->app->cfg) : json_null()));
}

int api_runtime_stop(struct app *app, const struct runtime *r, const char *reason)
{
	json_t *params = json_pack("{s:s,s:s}", "user", r->user_name, "reason", reason);
	json_t *reply = NULL;
	int rc = ipc_client_call(app->supervisor, "runtime_stop", params, &reply);
	const char *type = json_string_value(json_object_get(reply, "type"));

	json_decref(params);
	if (rc == 0 && type && strcmp(type, "ok") == 0)
		runtimes_set_state(app->db, r->id, RUNTIME_STOPPING, reason, time(NULL));
	else if (rc == 0) /* the supervisor has no such sandbox: it is already gone */
		runtimes_set_state(app->db, r->id, r->state == RUNTIME_STARTING ? RUNTIME_FAILED
									       : RUNTIME_STOPPED,
				   reason, time(NULL));
	json_decref(reply);
	return rc;
}

void api_session_stop(struct http_request *req)
{
	struct runtime r;
	int rc = runtimes_live(req->app->db, req->auth.user.id, &r);

	if (rc < 0) {
		api_internal(req);
		return;
	}
	if (rc == 0) {
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "no_runtime", "you have no running runtime");
		return;
	}
	if (api_runtime_stop(req->app, &r, "stopped by the user") < 0) {
		http_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, "supervisor_unreachable",
				 "the supervisor did not answer; try again");
		return;
	}
	if (audit_add(req->app->db, time(NULL), req->auth.user.name, "runtime.stop",
		      req->auth.user.name, req->address, "stopped by the user") < 0)
		log_error("audit: runtime.stop of %s not recorded", req->auth.user.name);
	runtimes_latest(req->app->db, req->auth.user.id, &r);
	http_reply_json(req, MHD_HTTP_ACCEPTED,
			json_pack("{s:o}", "session", api_runtime_json(&r, req->app->cfg)));
}
