/* jobs.c - training jobs: POST /api/v1/jobs (submit), GET /api/v1/jobs
 * (list), GET /api/v1/jobs/{id}, POST /api/v1/jobs/{id}/stop, DELETE
 * /api/v1/jobs/{id} (docs/jobs.md, docs/api.md). A user sees, stops and
 * deletes their own jobs; an administrator holding admin:jobs any (the
 * list: ?user=NAME). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "auth/scope.h"
#include "http/http.h"
#include "jobs/jobs.h"
#include "jobs/jobtail.h"
#include "jobs/observe.h"
#include "jobs/retention.h"
#include "labd/app.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "sched/quota_check.h"
#include "store/audit.h"
#include "store/db.h"
#include "store/users.h"

#define LIST_LIMIT_DEFAULT 50
#define LIST_LIMIT_MAX 200

/* RFC 3339 UTC with milliseconds, or null for 0. */
static json_t *time_ms_json(int64_t at_ms)
{
	char text[21], out[32];

	if (at_ms <= 0)
		return json_null();
	api_time(at_ms / 1000, text);
	text[19] = '\0'; /* drop the Z */
	snprintf(out, sizeof(out), "%s.%03dZ", text, (int)(at_ms % 1000));
	return json_string(out);
}

static json_t *time_json(int64_t at)
{
	char text[21];

	if (at <= 0)
		return json_null();
	api_time(at, text);
	return json_string(text);
}

/* The warm pool the job ran in (p: its row, NULL when unread) and what became of
 * it; null without a pool. */
static json_t *warm_json(const struct job *j, const struct pool *p, int64_t now)
{
	const char *status = j->warm_status;
	const char *reason = j->warm_reason;

	if (j->pool_id <= 0)
		return json_null();
	if (!status[0] && jobs_live(j)) {
		status = "InUse";
	} else if (!status[0]) {
		status = "Terminated";
		reason = "not kept warm (keep_alive_s is 0)";
	}
	if (!reason[0] && p && p->state == POOL_ENDED)
		reason = p->end_reason;
	int64_t warm_s = j->warm_from ? (j->warm_to ? j->warm_to : now) - j->warm_from : 0;
	return json_pack("{s:I,s:s,s:b,s:o,s:o,s:I,s:o}", "id", (json_int_t)j->pool_id, "status",
			 status, "reused", j->reused_pool, "reused_by",
			 j->reused_by ? json_integer(j->reused_by) : json_null(), "available_until",
			 strcmp(status, "Available") == 0 ? time_json(j->warm_until) : json_null(),
			 "warm_s", (json_int_t)(warm_s > 0 ? warm_s : 0), "reason",
			 reason[0] ? json_string(reason) : json_null());
}

/* The host GPUs the job's pool (p, NULL when unread) holds or held ([1, 2]); [] before
 * a pool or for CPU. */
static json_t *gpus_json(const struct job *j, const struct pool *p)
{
	json_t *out = json_array();
	char *end;

	if (!j->gpu || !p)
		return out;
	for (const char *c = p->gpus; *c; c = *end ? end + 1 : end) {
		json_array_append_new(out, json_integer(strtol(c, &end, 10)));
		if (end == c)
			break;
	}
	return out;
}

static int add_transition(const struct job_transition *t, void *ctx)
{
	json_array_append_new(ctx, json_pack("{s:s,s:o,s:o,s:s}", "status",
					     jobs_secondary_name(t->secondary), "start_at",
					     time_ms_json(t->start_at_ms), "end_at",
					     time_ms_json(t->end_at_ms), "message", t->message));
	return 0;
}

static int add_interruption(const struct job_interruption *x, void *ctx)
{
	json_array_append_new(ctx, json_pack("{s:s,s:s,s:o,s:o,s:o}", "reason", x->reason,
					     "waiting", x->waiting, "at", time_ms_json(x->at_ms),
					     "requeued_at", time_ms_json(x->requeued_at_ms),
					     "resumed_at", time_ms_json(x->resumed_at_ms)));
	return 0;
}

/* Preemptible capacity (docs/jobs.md "Preemptible capacity"): the job's
 * capacity, its interruptions, and what its seconds were charged. */
static void add_capacity(struct app *app, const struct job *j, json_t *out, bool full, int64_t now)
{
	bool requeued = j->status == JOB_IN_PROGRESS && j->secondary == JOB_PENDING &&
			j->preemptions > 0;

	json_object_set_new(out, "capacity", json_string(j->preemptible ? "preemptible"
									 : "on-demand"));
	json_object_set_new(out, "preemptions", json_integer(j->preemptions));
	json_object_set_new(out, "status_reason", requeued ? json_string("Preempted") : json_null());
	json_object_set_new(out, "preempting",
			    j->preempting[0] ? json_string(j->preempting) : json_null());
	json_object_set_new(out, "charged_s", json_integer(jobs_charged_s(app->db, j->id, now)));
	if (!full)
		return;
	json_t *list = json_array();
	jobs_each_interruption(app->db, j->id, add_interruption, list);
	json_object_set_new(out, "interruptions", list);
}

/* The request fields as the spec holds them (normalised at submit). */
static void add_request(json_t *out, const struct job *j)
{
	static const char *const fields[] = {
		"command",	   "working_dir",     "environment", "hyperparameters",
		"input_channels", "output_path", "checkpoint_path", "metric_definitions", "script",
		NULL};
	json_t *spec = json_loads(j->spec ? j->spec : "{}", 0, NULL);

	for (const char *const *f = fields; *f; f++) {
		json_t *v = spec ? json_object_get(spec, *f) : NULL;
		json_object_set(out, *f, v ? v : json_null());
	}
	json_decref(spec);
}

/* A failed job's last log lines (jobs/jobtail.h): why it failed, beside failure_reason. */
static void add_failure_tail(struct app *app, const struct job *j, json_t *out)
{
	char tail[JOBTAIL_MAX_BYTES + 1];

	json_object_set_new(out, "failure_tail",
			    j->status == JOB_FAILED && jobtail_read(app->cfg, j->id, tail,
								   sizeof(tail)) > 0
				    ? json_string(tail)
				    : json_null());
}

json_t *api_job_json(struct app *app, const struct job *j, bool full)
{
	int64_t now = time(NULL);
	json_t *out = json_pack(
		"{s:I,s:s,s:s,s:s,s:s,s:o,s:o,s:s,s:i,s:s,s:I,s:I,s:I,s:i,s:i,s:I,s:I,s:o,s:o,s:o,"
		"s:I,s:I}",
		"id", (json_int_t)j->id, "name", j->name, "user", j->user_name, "status",
		jobs_status_name(j->status), "secondary_status", jobs_secondary_name(j->secondary),
		"failure_reason", j->failure_reason[0] ? json_string(j->failure_reason) : json_null(),
		"exit_code", j->exit_code >= 0 ? json_integer(j->exit_code) : json_null(), "type",
		j->gpu ? "gpu" : "cpu", "gpu_count", j->gpu_count, "image", j->image,
		"max_runtime_s", (json_int_t)j->max_runtime_s, "max_wait_s",
		(json_int_t)j->max_wait_s, "keep_alive_s", (json_int_t)j->keep_alive_s,
		"max_retries", j->max_retries, "attempt", j->attempt, "memory_bytes",
		(json_int_t)j->memory_bytes, "cpus_milli", (json_int_t)j->cpus_milli, "created_at",
		time_json(j->created_at), "started_at", time_json(j->started_at), "ended_at",
		time_json(j->ended_at), "billable_s", (json_int_t)jobs_billable_s(app->db, j->id, now),
		"training_s", (json_int_t)(j->training_ms / 1000));

	if (!out)
		return NULL;
	/* the kind of GPU device it runs on (docs/gpu.md); null for a CPU job */
	json_object_set_new(out, "gpu_kind", j->gpu ? json_string(j->gpu_kind) : json_null());
	struct pool p;
	bool have = j->pool_id > 0 && pools_find(app->db, j->pool_id, &p) == 1;
	json_object_set_new(out, "warm_pool", warm_json(j, have ? &p : NULL, now));
	json_object_set_new(out, "gpus", gpus_json(j, have ? &p : NULL));
	api_gpu_notice_set(app, out, 0, j->id);
	add_capacity(app, j, out, full, now);
	if (!full)
		return out; /* a list item: the row's own columns and two indexed reads */
	add_request(out, j);
	observe_job_json(app, j, out);
	add_failure_tail(app, j, out);
	json_t *transitions = json_array();
	jobs_each_transition(app->db, j->id, add_transition, transitions);
	json_object_set_new(out, "transitions", transitions);
	return out;
}

/* A quota_exceeded error naming the limit and its value. */
static json_t *quota_error(const char *message, const char *limit, int64_t value)
{
	json_t *body = http_error_json("quota_exceeded", message);
	json_t *err = json_object_get(body, "error");

	json_object_set_new(err, "limit", json_string(limit));
	json_object_set_new(err, "limit_value", json_integer(value));
	return body;
}

/* 429 quota_exceeded: concurrent_jobs reached. */
static void reply_concurrent(struct http_request *req, int64_t limit)
{
	char message[200];

	snprintf(message, sizeof(message),
		 "you have %lld jobs in progress, your plan's concurrent_jobs; wait for one to end "
		 "or stop one",
		 (long long)limit);
	http_add_header(req, "Retry-After", "60");
	http_reply_json(req, MHD_HTTP_TOO_MANY_REQUESTS,
			quota_error(message, "concurrent_jobs", limit));
}

/* 403 quota_exceeded: the user's kept jobs hold job_storage_bytes. */
static void reply_storage(struct http_request *req, int64_t limit)
{
	char message[300];

	snprintf(message, sizeof(message),
		 "your kept jobs hold your plan's job_storage_bytes (%lld bytes) of logs, specs and "
		 "metric points; delete ended jobs (DELETE /api/v1/jobs/{id}) to make room",
		 (long long)limit);
	http_reply_json(req, MHD_HTTP_FORBIDDEN, quota_error(message, "job_storage_bytes", limit));
}

void api_jobs_submit(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	struct app *app = http_app(req);
	struct jobs_refusal why;
	struct job j;
	json_t *body = api_body(req, jobs_submit_fields);

	if (!body)
		return;
	switch (jobs_submit(app, ident->user.id, ident->user.name, http_address(req), body, &j,
			    &why)) {
	case JOBS_SUBMIT_OK:
		http_reply_json(req, MHD_HTTP_CREATED, api_job_json(app, &j, true));
		jobs_row_free(&j);
		break;
	case JOBS_SUBMIT_INVALID:
		api_reply_field(req, why.err.field, "%s", why.err.message);
		break;
	case JOBS_SUBMIT_EXISTS:
		http_reply_error(req, MHD_HTTP_CONFLICT, "job_exists",
				 "you already have a job named \"%s\"; job names are unique per user",
				 json_string_value(json_object_get(body, "name")));
		break;
	case JOBS_SUBMIT_CONCURRENT:
		reply_concurrent(req, why.concurrent_limit);
		break;
	case JOBS_SUBMIT_QUOTA:
		api_reply_quota_exceeded_status(req, MHD_HTTP_TOO_MANY_REQUESTS, &why.window);
		break;
	case JOBS_SUBMIT_STORAGE:
		reply_storage(req, why.storage_limit);
		break;
	case JOBS_SUBMIT_ERROR:
		http_reply_internal(req);
		break;
	}
	json_decref(body);
}

struct list_walk {
	struct app *app;
	json_t *jobs;
};

static int add_job(const struct job *j, void *ctx)
{
	struct list_walk *w = ctx;
	json_t *v = api_job_json(w->app, j, false);

	if (v)
		json_array_append_new(w->jobs, v);
	return 0;
}

static bool status_filter_ok(const char *s)
{
	enum job_status st;
	enum job_secondary sec;

	return jobs_status_parse(s, &st) == 0 || jobs_secondary_parse(s, &sec) == 0;
}

void api_jobs_list(struct http_request *req)
{
	struct app *app = http_app(req);
	struct job_filter f = {0};
	uint64_t limit = LIST_LIMIT_DEFAULT, offset = 0;
	struct list_walk w = {app, json_array()};
	int64_t total = 0;

	f.status = http_query(req, "status");
	f.name = http_query(req, "name");
	if (api_query_uint(req, "limit", 1, LIST_LIMIT_MAX, &limit) < 0 ||
	    api_query_uint(req, "offset", 0, INT32_MAX, &offset) < 0 ||
	    api_list_owner(req, "jobs", SCOPE_ADMIN_JOBS, &f.user_id) < 0)
		goto out;
	f.limit = (int64_t)limit;
	f.offset = (int64_t)offset;
	if (f.status && !status_filter_ok(f.status)) {
		api_reply_field(req, "status",
			    "query parameter \"status\" must be a status (InProgress, Completed, "
			    "Failed, Stopping, Stopped) or a secondary status (Pending, Training...)");
		goto out;
	}
	if (jobs_list(app->db, &f, add_job, &w, &total) < 0) {
		http_reply_internal(req);
		goto out;
	}
	http_reply_json(req, MHD_HTTP_OK,
			json_pack("{s:O,s:I}", "jobs", w.jobs, "total", (json_int_t)total));
out:
	json_decref(w.jobs);
}

/* The job named by the path that the caller may see: 0 with *j, or -1 with
 * the reply set (404 for another user's job: its existence is not told). */
static int path_job(struct http_request *req, struct job *j)
{
	const struct auth_identity *ident = http_identity(req);
	const char *text = http_match(req)->params[0];
	uint64_t id;
	int rc;

	if (parse_uint(text, 1, INT64_MAX, &id) < 0) {
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no job %.32s", text);
		return -1;
	}
	rc = jobs_find_for(http_app(req)->db,
			   api_admin_reach(req, SCOPE_ADMIN_JOBS) ? 0 : ident->user.id, (int64_t)id, j);
	if (rc < 0)
		http_reply_internal(req);
	else if (rc == 0)
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no job %llu",
				 (unsigned long long)id);
	return rc == 1 ? 0 : -1;
}

void api_jobs_get(struct http_request *req)
{
	struct job j;

	if (path_job(req, &j) < 0)
		return;
	http_reply_json(req, MHD_HTTP_OK, api_job_json(http_app(req), &j, true));
	jobs_row_free(&j);
}

/* The optional body of a stop: {"grace_s"}. 0 with *grace_s (0 = [jobs] grace), or -1. */
static int stop_grace(struct http_request *req, int64_t *grace_s)
{
	static const char *const fields[] = {"grace_s", NULL};
	size_t len = 0;
	json_t *body, *v;

	*grace_s = 0;
	http_body(req, &len);
	if (len == 0)
		return 0;
	if (!(body = api_body(req, fields)))
		return -1;
	v = json_object_get(body, "grace_s");
	if (v && (!json_is_integer(v) || json_integer_value(v) < 1 ||
		  json_integer_value(v) > 3600)) {
		json_decref(body);
		api_reply_field(req, "grace_s", "field \"grace_s\" must be an integer from 1 to 3600");
		return -1;
	}
	*grace_s = v ? json_integer_value(v) : 0;
	json_decref(body);
	return 0;
}

void api_jobs_stop(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	struct app *app = http_app(req);
	struct job j;
	int64_t grace_s;
	int rc;

	if (stop_grace(req, &grace_s) < 0 || path_job(req, &j) < 0)
		return;
	rc = jobs_stop(app, &j, grace_s, ident->user.name);
	jobs_row_free(&j);
	if (rc == -EALREADY) {
		http_reply_error(req, MHD_HTTP_CONFLICT, "job_not_running",
				 "the job is not in progress (it ended or is stopping already)");
		return;
	}
	if (rc < 0 && rc != -ETIMEDOUT) {
		http_reply_internal(req);
		return;
	}
	if (path_job(req, &j) < 0)
		return;
	http_reply_json(req, MHD_HTTP_ACCEPTED, api_job_json(app, &j, true));
	jobs_row_free(&j);
}

void api_jobs_delete(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	struct app *app = http_app(req);
	struct job j;
	int rc;

	if (path_job(req, &j) < 0)
		return;
	rc = jobs_live(&j) ? -EBUSY : jobs_delete(app, j.id);
	if (rc == 0 && audit_add(app->db, time(NULL), ident->user.name, "job.delete", j.user_name,
				 http_address(req), j.name) < 0)
		log_error("audit: job.delete of %s not recorded", j.user_name);
	jobs_row_free(&j);
	if (rc == -EBUSY)
		http_reply_error(req, MHD_HTTP_CONFLICT, "job_not_ended",
				 "the job has not ended; stop it (POST /api/v1/jobs/%lld/stop) and "
				 "delete it once it has ended",
				 (long long)j.id);
	else if (rc == -ENOENT)
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no job %lld",
				 (long long)j.id);
	else if (rc < 0)
		http_reply_internal(req);
	else
		http_reply_empty(req, MHD_HTTP_NO_CONTENT);
}
