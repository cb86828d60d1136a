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
#include "store/jobs.h"

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
		.warmup_s = cfg->jobs_rules_warmup_s,
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

static int add_run(const struct job_transition *tr, void *ctx)
{
	struct observe_input *x = ctx;

	if (tr->secondary == JOB_TRAINING && x->in.n_run_starts < OBSERVE_RUNS_MAX)
		x->runs[x->in.n_run_starts++] = tr->start_at_ms;
	return 0;
}

void observe_input_release(struct observe_input *x)
{
	free(x->rows);
	free(x->samples);
	free(x->steps);
	free(x->step_at);
	free(x->step_v);
	memset(x, 0, sizeof(*x));
}

int observe_input_load(struct app *app, int64_t job_id, bool gpu, const struct observe_spec *spec,
		       int64_t started_ms, struct observe_input *x)
{
	int n_rows, n_steps;

	memset(x, 0, sizeof(*x));
	observe_limits(app->cfg, &x->limits);
	if (spec->warmup_s >= 0)
		x->limits.warmup_s = spec->warmup_s;
	snprintf(x->step_metric, sizeof(x->step_metric), "%s",
		 spec->step_metric[0] ? spec->step_metric : app->cfg->jobs_rules_step_metric);
	x->rows = calloc(OBSERVE_SAMPLES_KEEP, sizeof(*x->rows));
	x->samples = calloc(OBSERVE_SAMPLES_KEEP, sizeof(*x->samples));
	x->steps = calloc(OBSERVE_STEPS_MAX, sizeof(*x->steps));
	x->step_at = calloc(OBSERVE_STEPS_MAX, sizeof(*x->step_at));
	x->step_v = calloc(OBSERVE_STEPS_MAX, sizeof(*x->step_v));
	if (!x->rows || !x->samples || !x->steps || !x->step_at || !x->step_v)
		goto fail;
	n_rows = job_samples_list(app->db, job_id, x->rows, OBSERVE_SAMPLES_KEEP);
	n_steps = job_metrics_series(app->db, job_id, x->step_metric, x->step_at, x->step_v,
				     OBSERVE_STEPS_MAX);
	if (n_rows < 0 || n_steps < 0 || jobs_each_transition(app->db, job_id, add_run, x) < 0)
		goto fail;
	for (int i = 0; i < n_rows; i++)
		x->samples[i] = (struct rule_sample){
			.at_ms = x->rows[i].at_ms,
			.cpu_percent = x->rows[i].cpu_percent,
			.io_wait_percent = x->rows[i].io_wait_percent,
			.memory_bytes = x->rows[i].memory_bytes,
			.memory_limit_bytes = x->rows[i].memory_limit_bytes,
			.gpu_percent = x->rows[i].gpu_percent,
			.gpu_memory_bytes = x->rows[i].gpu_memory_bytes,
		};
	for (int i = 0; i < n_steps; i++)
		x->steps[i] = (struct rule_point){x->step_at[i], x->step_v[i]};
	x->in.samples = x->samples;
	x->in.n_samples = (size_t)n_rows;
	x->in.gpu = gpu;
	x->in.steps = x->steps;
	x->in.n_steps = (size_t)n_steps;
	x->in.started_ms = started_ms;
	x->in.run_starts_ms = x->runs;
	return 0;
fail:
	observe_input_release(x);
	return -1;
}

void observe_rules_run(struct observe *o, struct tracked *t, int64_t now_ms)
{
	struct observe_input x;
	struct rule_finding found[16];
	size_t n;

	if (observe_input_load(o->app, t->job_id, t->gpu, &t->rules_spec, t->started_ms, &x) < 0) {
		log_error("job %lld: cannot read its samples for the rules", (long long)t->job_id);
		return;
	}
	x.in.now_ms = now_ms;
	x.in.first_output_ms = t->first_output_ms;
	x.in.last_output_ms = t->last_output_ms;
	n = rules_evaluate(&x.in, &x.limits, found, 16);
	for (size_t i = 0; i < n; i++) {
		char *ev = evidence_text(&found[i], x.rows, x.step_at, x.step_v, x.step_metric);
		if (job_findings_put(o->app->db, t->job_id, found[i].rule, now_ms, found[i].message,
				     ev ? ev : "[]") < 0)
			log_error("job %lld: cannot store finding %s", (long long)t->job_id,
				  found[i].rule);
		free(ev);
	}
	observe_input_release(&x);
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
