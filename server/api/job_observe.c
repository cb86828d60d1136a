/* job_observe.c - GET /api/v1/jobs/{id}/metrics (every kept point of each
 * metric, the last value of each, whether they are final and which
 * definitions were dropped), GET /api/v1/jobs/{id}/samples (the kept
 * samples) and GET /api/v1/jobs/{id}/report (the profiler report);
 * docs/jobs.md "Metrics", "Profiling rules", "The profiler report". */
#include "api/api.h"
#include "http/http.h"
#include "jobs/observe.h"
#include "jobs/observe_report.h"
#include "labd/app.h"
#include "store/jobs.h"

void api_job_metrics(struct http_request *req)
{
	struct app *app = http_app(req);
	json_t *series, *final, *out;
	struct job j;

	if (api_path_job(req, &j) < 0)
		return;
	series = observe_metrics_json(app, j.id);
	final = observe_final_json(app, j.id);
	if (!series || !final) {
		json_decref(series);
		json_decref(final);
		out = NULL;
	} else {
		out = json_pack("{s:o, s:o}", "metrics", series, "final", final);
	}
	if (!out || observe_extraction_json(app, &j, out) < 0) {
		json_decref(out);
		jobs_row_free(&j);
		http_reply_internal(req);
		return;
	}
	jobs_row_free(&j);
	http_reply_json(req, MHD_HTTP_OK, out);
}

void api_job_samples(struct http_request *req)
{
	struct app *app = http_app(req);
	json_t *samples;
	struct job j;

	if (api_path_job(req, &j) < 0)
		return;
	jobs_row_free(&j);
	if (!(samples = observe_samples_json(app, j.id))) {
		http_reply_internal(req);
		return;
	}
	http_reply_json(req, MHD_HTTP_OK,
			json_pack("{s:I, s:b, s:o}", "job_id", (json_int_t)j.id, "gpu", j.gpu,
				  "samples", samples));
}

void api_job_report(struct http_request *req)
{
	struct app *app = http_app(req);
	json_t *report;
	struct job j;

	if (api_path_job(req, &j) < 0)
		return;
	report = observe_report_json(app, &j);
	jobs_row_free(&j);
	if (!report) {
		http_reply_internal(req);
		return;
	}
	http_reply_json(req, MHD_HTTP_OK, report);
}
