/* observe_rules.c - the profiling rules run over a job's kept samples, and
 * the pieces of JSON their evidence and the views share; see observe_rules.h. */
#include "jobs/observe_rules.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "jobs/observe_int.h"
#include "jobs/rules.h"
#include "labd/app.h"
#include "labd/log.h"
#include "sched/gpus.h"
#include "store/job_observe.h"

/* Step-time points the StepOutlier rule looks at: the newest. */
#define STEPS_MAX 2000

void observe_time(int64_t at_ms, char out[OBSERVE_TIME_LEN])
{
	struct tm tm;
	time_t t = (time_t)(at_ms / 1000);
	size_t n;

	gmtime_r(&t, &tm);
	n = strftime(out, OBSERVE_TIME_LEN, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, OBSERVE_TIME_LEN - n, ".%03uZ", (unsigned)(at_ms % 1000) % 1000u);
}

json_t *observe_time_json(int64_t at_ms)
{
	char t[OBSERVE_TIME_LEN];

	observe_time(at_ms, t);
	return json_string(t);
}

void observe_limits(const struct labd_config *cfg, struct rule_limits *l)
{
	*l = (struct rule_limits){
		.gpu_low_p95_percent = cfg->jobs_rules_gpu_low_p95_percent,
		.gpu_low_p5_percent = cfg->jobs_rules_gpu_low_p5_percent,
		.cpu_high_percent = cfg->jobs_rules_cpu_high_percent,
		.gpu_idle_percent = cfg->jobs_rules_gpu_idle_percent,
		.io_wait_percent = cfg->jobs_rules_io_wait_percent,
		.gpu_memory_increase_percent = cfg->jobs_rules_gpu_memory_increase_percent,
		.step_stddev = cfg->jobs_rules_step_stddev,
		.memory_near_percent = cfg->jobs_rules_memory_near_percent,
		.init_s = cfg->jobs_rules_init_s,
		.quiet_s = cfg->jobs_rules_quiet_s,
		.min_samples = cfg->jobs_rules_min_samples,
	};
}

/* A number, or null for an unknown (-1) reading. */
static json_t *reading(double v)
{
	return v < 0 ? json_null() : json_real(v);
}

static json_t *reading_bytes(int64_t v)
{
	return v < 0 ? json_null() : json_integer(v);
}

json_t *observe_sample_json(const struct job_sample_row *s)
{
	return json_pack("{s:o, s:o, s:o, s:I, s:o, s:o, s:o, s:I}", "at", observe_time_json(s->at_ms),
			 "cpu_percent", reading(s->cpu_percent), "io_wait_percent",
			 reading(s->io_wait_percent), "memory_bytes", (json_int_t)s->memory_bytes,
			 "memory_limit_bytes", reading_bytes(s->memory_limit_bytes), "gpu_percent",
			 reading(s->gpu_percent), "gpu_memory_bytes",
			 reading_bytes(s->gpu_memory_bytes), "log_bytes", (json_int_t)s->log_bytes);
}

/* The evidence of a finding, as the JSON text stored with it. */
static char *evidence_text(const struct rule_finding *f, const struct job_sample_row *rows,
			   const int64_t *step_at, const double *step_v, const char *step_name)
{
	json_t *a = json_array();
	char *text;

	for (size_t i = 0; a && i < f->n_evidence; i++) {
		size_t k = f->evidence[i];
		json_array_append_new(a, f->evidence_steps
						 ? json_pack("{s:o, s:s, s:f}", "at",
							     observe_time_json(step_at[k]), "metric",
							     step_name, "value", step_v[k])
						 : observe_sample_json(&rows[k]));
	}
	text = a ? json_dumps(a, JSON_COMPACT) : NULL;
	json_decref(a);
	return text;
}

void observe_rules_run(struct observe *o, struct tracked *t, int64_t now_ms)
{
	const char *step_name = o->app->cfg->jobs_rules_step_metric;
	struct job_sample_row *rows = calloc(OBSERVE_SAMPLES_KEEP, sizeof(*rows));
	struct rule_sample *samples = calloc(OBSERVE_SAMPLES_KEEP, sizeof(*samples));
	struct rule_point *steps = calloc(STEPS_MAX, sizeof(*steps));
	int64_t *step_at = calloc(STEPS_MAX, sizeof(*step_at));
	double *step_v = calloc(STEPS_MAX, sizeof(*step_v));
	struct rule_finding found[16];
	int n_rows, n_steps;
	size_t n;

	if (!rows || !samples || !steps || !step_at || !step_v)
		goto out;
	n_rows = job_samples_list(o->app->db, t->job_id, rows, OBSERVE_SAMPLES_KEEP);
	n_steps = job_metrics_series(o->app->db, t->job_id, step_name, step_at, step_v, STEPS_MAX);
	if (n_rows < 0 || n_steps < 0)
		goto out;
	for (int i = 0; i < n_rows; i++)
		samples[i] = (struct rule_sample){
			.at_ms = rows[i].at_ms,
			.cpu_percent = rows[i].cpu_percent,
			.io_wait_percent = rows[i].io_wait_percent,
			.memory_bytes = rows[i].memory_bytes,
			.memory_limit_bytes = rows[i].memory_limit_bytes,
			.gpu_percent = rows[i].gpu_percent,
			.gpu_memory_bytes = rows[i].gpu_memory_bytes,
		};
	for (int i = 0; i < n_steps; i++)
		steps[i] = (struct rule_point){step_at[i], step_v[i]};
	struct rule_input in = {
		.samples = samples, .n_samples = (size_t)n_rows, .gpu = t->gpu,
		.steps = steps, .n_steps = (size_t)n_steps, .started_ms = t->started_ms,
		.now_ms = now_ms, .first_output_ms = t->first_output_ms,
		.last_output_ms = t->last_output_ms,
	};
	n = rules_evaluate(&in, &o->limits, found, 16);
	for (size_t i = 0; i < n; i++) {
		char *ev = evidence_text(&found[i], rows, step_at, step_v, step_name);
		if (job_findings_put(o->app->db, t->job_id, found[i].rule, now_ms, found[i].message,
				     ev ? ev : "[]") < 0)
			log_error("job %lld: cannot store finding %s", (long long)t->job_id,
				  found[i].rule);
		free(ev);
	}
out:
	free(rows);
	free(samples);
	free(steps);
	free(step_at);
	free(step_v);
}

void observe_gpu_reading(const struct gpu_info *info, size_t n, const char *ids, double *percent,
			 int64_t *memory)
{
	double sum = 0;
	int counted = 0;
	int64_t mem = 0;
	bool mem_known = false;

	*percent = -1;
	*memory = -1;
	for (const char *s = ids; *s;) {
		char *end;
		unsigned long id = strtoul(s, &end, 10);
		if (end == s)
			break;
		for (size_t i = 0; i < n; i++) {
			if (info[i].id != id)
				continue;
			if (info[i].utilization_percent >= 0) {
				sum += info[i].utilization_percent;
				counted++;
			}
			if (info[i].memory_used_bytes >= 0) {
				mem += info[i].memory_used_bytes;
				mem_known = true;
			}
		}
		s = *end == ',' ? end + 1 : end;
	}
	if (counted)
		*percent = sum / counted;
	if (mem_known)
		*memory = mem;
}
