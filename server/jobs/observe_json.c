/* observe_json.c - the JSON views of what was observed; see observe.h. */
#include "jobs/observe.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "jobs/extract.h"
#include "jobs/joblog.h"
#include "jobs/observe_rules.h"
#include "labd/app.h"
#include "labd/log.h"
#include "sched/gpus.h"
#include "store/job_observe.h"
#include "store/jobs.h"


/* ---- JSON views ---- */

static int add_point(void *ctx, const char *name, int64_t at_ms, double value)
{
	json_t *series = json_object_get(ctx, name);

	if (!series) {
		series = json_array();
		if (json_object_set_new(ctx, name, series) < 0)
			return 1;
	}
	json_array_append_new(series,
			      json_pack("{s:o, s:f}", "at", observe_time_json(at_ms), "value", value));
	return 0;
}

json_t *observe_metrics_json(struct app *app, int64_t job_id)
{
	json_t *m = json_object();

	if (m && job_metrics_each(app->db, job_id, add_point, m) < 0) {
		json_decref(m);
		return NULL;
	}
	return m;
}

static int add_final(void *ctx, const char *name, int64_t at_ms, double value)
{
	json_array_append_new(ctx, json_pack("{s:s, s:f, s:o}", "name", name, "value", value, "at",
					     observe_time_json(at_ms)));
	return 0;
}

/* The last value of each metric, as the store has them now. */
static json_t *final_json(struct app *app, int64_t job_id)
{
	json_t *a = json_array();

	if (a && job_metrics_last(app->db, job_id, add_final, a) < 0) {
		json_decref(a);
		return NULL;
	}
	return a;
}

json_t *observe_final_json(struct app *app, int64_t job_id)
{
	return final_json(app, job_id);
}

json_t *observe_samples_json(struct app *app, int64_t job_id)
{
	struct job_sample_row *rows = calloc(OBSERVE_SAMPLES_KEEP, sizeof(*rows));
	json_t *a = json_array();
	int n;

	if (!rows || !a || (n = job_samples_list(app->db, job_id, rows, OBSERVE_SAMPLES_KEEP)) < 0) {
		free(rows);
		json_decref(a);
		return NULL;
	}
	for (int i = 0; i < n; i++)
		json_array_append_new(a, observe_sample_json(&rows[i]));
	free(rows);
	return a;
}

static int add_finding(void *ctx, const char *rule, int64_t first_at_ms, int64_t last_at_ms,
		       const char *message, const char *samples_json)
{
	json_t *samples = json_loads(samples_json ? samples_json : "[]", 0, NULL);

	json_array_append_new(ctx, json_pack("{s:s, s:s, s:o, s:o, s:s, s:o}", "rule", rule,
					     "status", "IssuesFound", "first_at",
					     observe_time_json(first_at_ms), "last_at",
					     observe_time_json(last_at_ms), "message", message ? message : "",
					     "samples", samples ? samples : json_array()));
	return 0;
}

json_t *observe_findings_json(struct app *app, int64_t job_id)
{
	json_t *a = json_array();

	if (a && job_findings_each(app->db, job_id, add_finding, a) < 0) {
		json_decref(a);
		return NULL;
	}
	return a;
}

/* [{"index", "name", "reason"}] of the definitions in mask (bits of the
 * spec's metric_definitions). */
static json_t *dropped_json(const struct job *j, uint64_t mask)
{
	json_t *a = json_array(), *spec, *defs;

	if (!a || !mask)
		return a;
	spec = json_loads(j->spec ? j->spec : "{}", 0, NULL);
	defs = json_object_get(spec, "metric_definitions");
	for (size_t i = 0; i < 64 && i < json_array_size(defs); i++) {
		const char *name = json_string_value(json_object_get(json_array_get(defs, i), "name"));
		if (!(mask & (1ULL << i)) || !name)
			continue;
		char reason[160];
		snprintf(reason, sizeof(reason),
			 "its regex hit PCRE2's match limit on %d lines, so it is no longer applied "
			 "to this job's log",
			 EXTRACT_DROP_AFTER);
		json_array_append_new(a, json_pack("{s:I, s:s, s:s}", "index", (json_int_t)i, "name",
						   name, "reason", reason));
	}
	json_decref(spec);
	return a;
}

int observe_extraction_json(struct app *app, const struct job *j, json_t *obj)
{
	struct job_observe_row row;
	char path[4096];
	int64_t size = 0;
	bool complete;

	if (job_observe_get(app->db, j->id, &row) < 0) {
		log_error("job %lld: cannot read where its log was read", (long long)j->id);
		return -1;
	}
	if (jobs_log_path(app->cfg, j->id, path, sizeof(path)) == 0)
		size = joblog_size(path);
	/* a job over with its log unread (labd-web was down) is asked for here */
	complete = observe_settle_job(app, j, row.log_offset, size > 0 ? size : 0);
	json_object_set_new(obj, "metrics_complete", json_boolean(complete));
	json_object_set_new(obj, "dropped_metrics", dropped_json(j, row.dropped_defs));
	return 0;
}

void observe_job_json(struct app *app, const struct job *j, json_t *obj)
{
	char path[4096];
	json_t *final = final_json(app, j->id), *findings = observe_findings_json(app, j->id);
	int64_t size = 0;

	if (!final || !findings) {
		log_error("job %lld: cannot read its metrics or findings", (long long)j->id);
		json_decref(final);
		json_decref(findings);
		return;
	}
	if (jobs_log_path(app->cfg, j->id, path, sizeof(path)) == 0)
		size = joblog_size(path);
	json_object_set_new(obj, "final_metrics", final);
	json_object_set_new(obj, "findings", findings);
	json_object_set_new(obj, "log_bytes", json_integer(size > 0 ? size : 0));
	observe_extraction_json(app, j, obj);
}
