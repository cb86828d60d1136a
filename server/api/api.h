/* api.h - JSON API handlers (the files of server/api/) and their shared helpers.
 * Every handler sets exactly one reply; on any error nothing is changed. */
#ifndef LABD_API_H
#define LABD_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "auth/auth.h"

struct http_request;
struct user;

/* Pure part of api_body: parses text as a JSON object of at most 8 levels with
 * only the allowed fields. On failure returns NULL and writes the error code
 * ("bad_json" or "bad_field") and a message naming the problem. */
json_t *api_parse_object(const char *text, size_t len, const char *const *allowed,
			 const char **code, char *message, size_t msglen);
/* Parses the request body as a JSON object, allowing only the listed field
 * names (NULL-terminated). On failure sets the 400/415 reply and returns NULL;
 * on success the caller owns the returned reference. */
json_t *api_body(struct http_request *req, const char *const *allowed);
/* Reads an optional string field: 1 present, 0 absent, -1 wrong type (reply set). */
int api_string(struct http_request *req, json_t *obj, const char *field, const char **out);
/* Reads an optional boolean field likewise. */
int api_bool(struct http_request *req, json_t *obj, const char *field, bool *out);
/* Formats a UNIX time as RFC 3339 UTC into out[21]. */
void api_time(int64_t t, char out[21]);
/* The public JSON view of a user (no hash). Caller owns the reference. */
json_t *api_user_json(const struct user *u);
/* The name in the path's first parameter, or NULL when it cannot name a user,
 * plan or group (they share the user-name rule). */
const char *api_path_name(struct http_request *req);
/* Answers for the row of kind what named in the path, given what the store
 * said (rc: 1 found, 0 none, <0 error): 0 when found, else -1 with the reply
 * set (404 naming it, or 500). */
int api_path_found(struct http_request *req, const char *what, int rc);
/* Loads the user named in the path; 0 with *u, or -1 with the reply set. */
int api_path_user(struct http_request *req, struct user *u);
/* 400 bad_field naming field, the message formatted as printf's. */
void api_reply_field(struct http_request *req, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Reads query parameter name, when present, as a whole number in [min, max]
 * into *out (absent: *out unchanged). 0, or -1 with the 400 naming it. */
int api_query_uint(struct http_request *req, const char *name, uint64_t min, uint64_t max,
		   uint64_t *out);
/* True when the caller may act on other users' objects of a realm: an
 * administrator whose request holds admin_scope (a cookie session holds every
 * scope of its role; a token only those it was given). */
bool api_admin_reach(struct http_request *req, unsigned admin_scope);
/* Whose list a listing shows (what: "jobs", "warm pools"): the caller's, or
 * the user named by ?user= for an administrator holding admin_scope. 0 with
 * *user_id, or -1 with the reply set (403 forbidden for a user, 403
 * insufficient_scope for an admin token without admin_scope, 404 for no such
 * user, 500). */
int api_list_owner(struct http_request *req, const char *what, unsigned admin_scope,
		   int64_t *user_id);
/* Closes the WebSockets an account event takes away (app->close_connections;
 * a no-op where none is set). what is an enum app_close (labd/app.h). */
void api_close_connections(struct http_request *req, int what, int64_t id);

/* auth.c */
/* Sets the 401/429/500 reply for a failed login (429 with Retry-After). */
void api_login_failed(struct http_request *req, enum login_result res, int64_t retry_after);
void api_health(struct http_request *req);
void api_login(struct http_request *req);
void api_logout(struct http_request *req);
void api_me(struct http_request *req);
/* single sign-on (oidc.c): whether it is on, for the login page */
void api_sso(struct http_request *req);
void api_me_password(struct http_request *req);
/* tokens.c */
void api_tokens_list(struct http_request *req);
void api_tokens_create(struct http_request *req);
void api_tokens_delete(struct http_request *req);
/* users.c */
void api_users_list(struct http_request *req);
void api_users_create(struct http_request *req);
void api_users_get(struct http_request *req);
void api_users_patch(struct http_request *req);
void api_users_delete(struct http_request *req);
/* job_access.c: the job in the path's first parameter that the caller may
 * see (their own; any for an administrator holding admin:jobs): 0 with *out (release with
 * jobs_row_free), or -1 with the reply set (404 not_found, 500). */
struct job;
int api_path_job(struct http_request *req, struct job *out);
/* job_logs.c, job_observe.c, job_events.c: a job's log (range or follow),
 * metrics, samples, profiler report and status events (docs/jobs.md). */
void api_job_logs(struct http_request *req);
/* GET or POST /api/v1/jobs/{id}/shell as a WebSocket (job_shell.c) */
void api_job_shell(struct http_request *req);
void api_job_metrics(struct http_request *req);
void api_job_samples(struct http_request *req);
void api_job_report(struct http_request *req);
void api_job_events(struct http_request *req);
/* webhooks.c: the caller's webhooks and their delivery log (docs/jobs.md
 * "Notifications") */
void api_webhooks_create(struct http_request *req);
void api_webhooks_list(struct http_request *req);
void api_webhooks_delete(struct http_request *req);
void api_webhooks_deliveries(struct http_request *req);
/* runtime.c */
struct runtime;
struct labd_config;
struct app;
void api_runtime_start(struct http_request *req);
void api_runtime_get(struct http_request *req);
void api_runtime_stop(struct http_request *req);
/* Answers the deprecated /api/v1/me/session with 308 to /api/v1/me/runtime. */
void api_runtime_moved(struct http_request *req);
/* runtimes_admin.c: every live runtime (admin), and an administrator's stop */
void api_runtimes_list(struct http_request *req);
void api_runtimes_stop(struct http_request *req);
/* runtime_events.c: the caller's runtime as Server-Sent Events. */
void api_runtime_events(struct http_request *req);
/* open.c: "Open in labd", a repository cloned or updated in the caller's
 * running runtime (202, then the outcome from the GET). */
void api_runtime_open(struct http_request *req);
void api_runtime_open_get(struct http_request *req);
/* The public JSON view of a runtime. Caller owns the reference. */
json_t *api_runtime_json(const struct runtime *r, const struct labd_config *cfg);
/* The body of every runtime answer, {"runtime": runtime}, taking runtime (an
 * object or null). "session" carries the same value for one release, for
 * clients of the API before the runtime had its own name (docs/api.md). */
json_t *api_runtime_reply(json_t *runtime);
/* On a Slurm backend, a starting runtime that waits for its allocation gets
 * "slurm": {"reason": words, "estimate_start_at": time or null} added to j (an
 * api_runtime_json object); elsewhere j is left as it is. Returns j. */
json_t *api_runtime_slurm(json_t *j, const struct runtime *r, struct app *app);
/* quota.c: limits as JSON ({name: integer | "unlimited"}, set ones only) */
struct quota_limits;
json_t *api_limits_json(const struct quota_limits *l);
/* Reads the optional limits object at field (null values = not set): 0, or
 * -1 with the 400 naming "field.limit" set. */
int api_limits_read(struct http_request *req, json_t *obj, const char *field,
		    struct quota_limits *out);
/* Reads "plan" (a plan name or null = none): 1 present, 0 absent, -1 reply set. */
int api_plan_field(struct http_request *req, json_t *body, const char **plan);
void api_me_quota(struct http_request *req);
/* quota_use.c: 403 quota_exceeded naming the used-up window w. */
struct quota_window;
void api_reply_quota_exceeded(struct http_request *req, const struct quota_window *w);
/* The same refusal with another status (429 for a job's submit). */
void api_reply_quota_exceeded_status(struct http_request *req, unsigned status,
				     const struct quota_window *w);
/* Sets "used", "remaining" and "next_free_at" (objects keyed by limit name)
 * on out for user_id now; -1 with a 500 reply when the store fails. */
int api_quota_use_json(struct http_request *req, int64_t user_id, json_t *out);
/* quota_storage.c: the user's effective storage_bytes (QUOTA_UNLIMITED,
 * or QUOTA_UNSET when the store failed). */
int64_t api_storage_quota(struct http_request *req, int64_t user_id);
/* Sets "storage": {"used_bytes", "quota_bytes"} on out (null when unknown or
 * unlimited) and "storage_bytes" in out's "used" and "remaining" objects. */
void api_storage_json(struct http_request *req, const char *user, int64_t user_id, json_t *out);
enum api_storage_check { API_STORAGE_OK, API_STORAGE_REFUSED /* reply set */ };
/* Whether user's storage quota may go from before to after: lowering it
 * below what the home holds is refused (409 naming both sizes), as is
 * lowering it while the use is unknown (503). */
enum api_storage_check api_storage_check(struct http_request *req, const char *user,
					 int64_t user_id, int64_t before, int64_t after);
/* After a change is stored: resizes the home (never shrinks). "online",
 * "next_start" or "unchanged"; NULL when storage did not change. */
const char *api_storage_apply(struct http_request *req, const char *user, int64_t user_id,
			      int64_t before, int64_t after);
/* Every user's storage quota before a change that may touch many (a plan's
 * limits, a group's plan or members); release with
 * api_storage_snapshot_release. 0, or -1 with a 500 reply. */
struct api_storage_snapshot {
	struct {
		int64_t id, before, after;
		char name[33];
	} *u;
	size_t n, cap;
};
int api_storage_snapshot(struct http_request *req, struct api_storage_snapshot *s);
/* After the change is stored: api_storage_check for each user whose quota
 * changed (REFUSED with the reply set: the caller undoes the change). */
enum api_storage_check api_storage_recheck(struct http_request *req,
					   struct api_storage_snapshot *s);
/* Resizes the homes of those whose quota changed (after a recheck). */
void api_storage_apply_all(struct http_request *req, const struct api_storage_snapshot *s);
/* The same, answering what was done per user whose quota changed:
 * [{"user","quota_bytes" (null = unlimited),"applied"}]. */
json_t *api_storage_apply_report(struct http_request *req, const struct api_storage_snapshot *s);
void api_storage_snapshot_release(struct api_storage_snapshot *s);
/* quota_jobs.c: sets "job_storage": {"used_bytes", "quota_bytes" (limit; null
 * when QUOTA_UNLIMITED), "jobs", "spec_bytes", "log_bytes", "metric_bytes"}
 * on out, the user's live jobs measured first. 0, or -1 with a 500 reply. */
int api_job_storage_json(struct http_request *req, int64_t user_id, int64_t limit, json_t *out);
void api_user_quota_get(struct http_request *req);
void api_user_quota_put(struct http_request *req);
/* jobs.c: training jobs (docs/jobs.md) */
struct job;
void api_jobs_submit(struct http_request *req);
void api_jobs_list(struct http_request *req);
void api_jobs_get(struct http_request *req);
void api_jobs_stop(struct http_request *req);
/* DELETE /api/v1/jobs/{id}: an ended job and all it keeps (204; 409 job_not_ended) */
void api_jobs_delete(struct http_request *req);
/* The job object of the API (full: with the request fields, transitions,
 * final metrics, findings and log size, as GET /api/v1/jobs/{id}; else a list
 * item: the row's columns, billable_s and warm_pool only, no spec parsed and
 * no metric read). Caller owns it. */
json_t *api_job_json(struct app *app, const struct job *j, bool full);
/* warm_pools.c */
void api_warm_pools_list(struct http_request *req);
void api_warm_pools_delete(struct http_request *req);
/* plans.c */
/* images.c */
void api_images_list(struct http_request *req);
void api_plans_list(struct http_request *req);
void api_plans_create(struct http_request *req);
void api_plans_get(struct http_request *req);
void api_plans_put(struct http_request *req);
void api_plans_delete(struct http_request *req);
/* users_import.c: POST /api/v1/users/import (a CSV of users, dry run first) */
void api_users_import(struct http_request *req);

/* groups.c */
void api_groups_list(struct http_request *req);
void api_groups_create(struct http_request *req);
void api_groups_get(struct http_request *req);
void api_groups_put(struct http_request *req);
void api_groups_delete(struct http_request *req);
/* groups_end.c: ends the courses due (their members disabled) and retires
 * their accounts after [runtime] course_retention; returns the clock_ms()
 * time of the next pass. Runs on the web process's maintenance ticker. */
long long api_groups_end_pass(struct app *app);
/* The user's groups that end within [runtime] course_notice (or have ended),
 * earliest first: [{"group", "expires_at"}], for GET /api/v1/me. */
json_t *api_course_ends_json(struct http_request *req, int64_t user_id);
/* audit.c */
void api_audit_list(struct http_request *req);
/* gpus.c: the GPU pool and its queue (admins see holders) */
void api_gpus(struct http_request *req);
/* usage.c: the usage ledger, the caller's own and (admins) everyone's */
void api_usage_me(struct http_request *req);
void api_usage_all(struct http_request *req);

#endif
