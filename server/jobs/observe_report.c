/* observe_report.c - a job's profiler report; see observe_report.h. */
#include "jobs/observe_report.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "jobs/observe.h"
#include "jobs/observe_rules.h"
#include "jobs/observe_spec.h"
#include "jobs/rules.h"
#include "labd/app.h"
#include "labd/log.h"
#include "store/job_observe.h"
#include "store/jobs.h"

json_t *observe_histogram_json(const double *v, size_t n, size_t bars)
{
	json_t *a = json_array();
	double lo, hi, width;
	size_t *count;

	if (!a || n == 0 || bars == 0)
		return a;
	lo = hi = v[0];
	for (size_t i = 1; i < n; i++) {
		lo = v[i] < lo ? v[i] : lo;
		hi = v[i] > hi ? v[i] : hi;
	}
	if (hi == lo)
		bars = 1;
	width = hi > lo ? (hi - lo) / (double)bars : 0;
	if (!(count = calloc(bars, sizeof(*count)))) {
		json_decref(a);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		size_t b = width > 0 ? (size_t)((v[i] - lo) / width) : 0;
		count[b < bars ? b : bars - 1]++;
	}
	for (size_t b = 0; b < bars; b++)
		json_array_append_new(a, json_pack("{s:f, s:f, s:I}", "from", lo + width * (double)b,
						   "to", b + 1 == bars ? hi : lo + width * (double)(b + 1),
						   "count", (json_int_t)count[b]));
	free(count);
	return a;
}

/* {"p5", "p50", "p95", "max"} of the known values, or null when none is. */
static json_t *spread(double *v, size_t n)
{
	if (n == 0)
		return json_null();
	return json_pack("{s:f, s:f, s:f, s:f}", "p5", rules_percentile(v, n, 5), "p50",
			 rules_percentile(v, n, 50), "p95", rules_percentile(v, n, 95), "max",
			 rules_percentile(v, n, 100));
}

/* One reading of a sample: a percent or bytes, < 0 unknown. */
static double field(const struct rule_sample *s, int which)
{
	switch (which) {
	case 0: return s->cpu_percent;
	case 1: return s->gpu_percent;
	case 2: return s->io_wait_percent;
	case 3: return (double)s->memory_bytes;
	default: return (double)s->gpu_memory_bytes;
	}
}

/* The percentiles of each reading over the samples after the warm-up. */
static json_t *usage_json(const struct observe_input *x, double *buf)
{
	static const char *const names[] = {"cpu_percent", "gpu_percent", "io_wait_percent",
					    "memory_bytes", "gpu_memory_bytes"};
	json_t *u = json_object();

	for (int w = 0; u && w < 5; w++) {
		size_t n = 0;
		for (size_t i = 0; i < x->in.n_samples; i++) {
			double v = field(&x->samples[i], w);
			if (v >= 0 && !rules_in_warmup(&x->in, &x->limits, x->samples[i].at_ms))
				buf[n++] = v;
		}
		json_object_set_new(u, names[w], spread(buf, n));
	}
	return u;
}

/* The kept samples, each marked "warmup" when the rules that skip it did. */
static json_t *samples_json(const struct observe_input *x, size_t *in_warmup)
{
	json_t *a = json_array();

	*in_warmup = 0;
	for (size_t i = 0; a && i < x->in.n_samples; i++) {
		json_t *s = observe_sample_json(&x->rows[i]);
		bool w = rules_in_warmup(&x->in, &x->limits, x->samples[i].at_ms);
		*in_warmup += w;
		json_object_set_new(s, "warmup", json_boolean(w));
		json_array_append_new(a, s);
	}
	return a;
}

/* The step metric's points after the warm-up, their spread and histogram. */
static json_t *steps_json(const struct observe_input *x, double *buf)
{
	size_t n = 0;
	json_t *bars;

	for (size_t i = 0; i < x->in.n_steps; i++)
		if (!rules_in_warmup(&x->in, &x->limits, x->steps[i].at_ms))
			buf[n++] = x->steps[i].value;
	if (!(bars = observe_histogram_json(buf, n, OBSERVE_HISTOGRAM_BARS)))
		return NULL;
	return json_pack("{s:s, s:I, s:I, s:o, s:o}", "metric", x->step_metric, "count",
			 (json_int_t)n, "warmup_count", (json_int_t)(x->in.n_steps - n), "spread",
			 spread(buf, n), "histogram", bars);
}

/* Every rule: what it looks at, its status, its finding and the advice. */
static json_t *rules_json(const struct job *j, json_t *findings)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < rules_count(); i++) {
		json_t *finding = NULL, *f;
		size_t k;
		const char *status;

		json_array_foreach(findings, k, f)
			if (strcmp(json_string_value(json_object_get(f, "rule")), rules_name(i)) == 0)
				finding = f;
		if (finding)
			status = "IssuesFound";
		else if (rules_needs_gpu(i) && !j->gpu)
			status = "NotApplicable";
		else if (jobs_live(j))
			status = "InProgress";
		else
			status = "NoIssuesFound";
		json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:b, s:b, s:s, s:O?}", "rule",
						   rules_name(i), "description", rules_description(i),
						   "status", status, "needs_gpu", rules_needs_gpu(i),
						   "skips_warmup", rules_after_warmup(i),
						   "recommendation", rules_advice(i), "finding",
						   finding));
	}
	return a;
}

static json_t *runs_json(const struct observe_input *x)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < x->in.n_run_starts; i++)
		json_array_append_new(a, observe_time_json(x->runs[i]));
	return a;
}

json_t *observe_report_json(struct app *app, const struct job *j)
{
	struct observe_spec spec;
	struct job_observe_row row;
	struct observe_input x;
	json_t *findings = NULL, *out = NULL;
	double *buf = NULL;
	size_t in_warmup;

	observe_spec_read(j->spec, &spec);
	if (job_observe_get(app->db, j->id, &row) < 0 ||
	    observe_input_load(app, j->id, j->gpu, &spec,
			       row.started_at_ms ? row.started_at_ms : j->started_at * 1000, &x) < 0) {
		log_error("job %lld: cannot read its samples for the report", (long long)j->id);
		return NULL;
	}
	buf = malloc((x.in.n_samples > x.in.n_steps ? x.in.n_samples : x.in.n_steps) * sizeof(*buf) +
		     sizeof(*buf));
	findings = observe_findings_json(app, j->id);
	if (buf && findings)
		out = json_pack("{s:I, s:s, s:s, s:s, s:b, s:I, s:s, s:o, s:o, s:o, s:o, s:o}",
				"job_id", (json_int_t)j->id, "name", j->name, "status",
				jobs_status_name(j->status), "secondary_status",
				jobs_secondary_name(j->secondary), "gpu", j->gpu, "warmup_s",
				(json_int_t)x.limits.warmup_s, "warmup_from",
				spec.warmup_s >= 0 ? "job" : "config", "runs", runs_json(&x),
				"rules", rules_json(j, findings), "samples",
				samples_json(&x, &in_warmup), "usage", usage_json(&x, buf),
				"step_times", steps_json(&x, buf));
	if (out) {
		json_object_set_new(out, "warmup_samples", json_integer((json_int_t)in_warmup));
		json_object_set_new(out, "findings_count", json_integer((json_int_t)json_array_size(findings)));
	}
	if (out && observe_extraction_json(app, j, out) < 0) {
		json_decref(out);
		out = NULL;
	}
	json_decref(findings);
	free(buf);
	observe_input_release(&x);
	return out;
}
