/* observe.c - empty hooks until part B2's observability lands (B2 replaces
 * this file); see observe.h. */
#include "jobs/observe.h"

int observe_init(struct app *app)
{
	(void)app;
	return 0;
}

void observe_free(struct app *app) { (void)app; }

void observe_job_started(struct app *app, int64_t job_id)
{
	(void)app;
	(void)job_id;
}

void observe_sample(struct app *app, const struct job *job, const struct backend_job_sample *s)
{
	(void)app;
	(void)job;
	(void)s;
}

void observe_job_ended(struct app *app, int64_t job_id)
{
	(void)app;
	(void)job_id;
}

void observe_tick(struct app *app) { (void)app; }

void observe_job_json(struct app *app, int64_t job_id, json_t *obj)
{
	(void)app;
	(void)job_id;
	json_object_set_new(obj, "final_metrics", json_array());
	json_object_set_new(obj, "findings", json_array());
	json_object_set_new(obj, "log_bytes", json_integer(0));
}

void jobs_watch_notify(struct app *app, int64_t job_id)
{
	(void)app;
	(void)job_id;
}
