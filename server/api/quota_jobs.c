/* quota_jobs.c - what a user's kept training jobs hold on the state file
 * system against their job_storage_bytes (GET /api/v1/me/quota and the
 * admin's user quota; docs/jobs.md "Retention"). */
#include "api/api.h"
#include "http/http.h"
#include "jobs/retention.h"
#include "labd/app.h"
#include "store/job_storage.h"
#include "store/user_quotas.h"

int api_job_storage_json(struct http_request *req, int64_t user_id, int64_t limit, json_t *out)
{
	struct app *app = http_app(req);
	struct job_storage_use use;
	bool limited = limit != QUOTA_UNLIMITED;

	jobs_storage_measure(app, user_id); /* its live jobs' logs and points now */
	if (job_storage_of_user(app->db, user_id, &use) < 0) {
		http_reply_internal(req);
		return -1;
	}
	json_object_set_new(
		out, "job_storage",
		json_pack("{s:I,s:o,s:I,s:I,s:I,s:I}", "used_bytes", (json_int_t)use.total_bytes,
			  "quota_bytes", limited ? json_integer(limit) : json_null(), "jobs",
			  (json_int_t)use.jobs, "spec_bytes", (json_int_t)use.spec_bytes,
			  "log_bytes", (json_int_t)use.log_bytes, "metric_bytes",
			  (json_int_t)use.metric_bytes));
	return 0;
}
