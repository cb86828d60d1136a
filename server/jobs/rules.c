/* rules.c - the profiling rules; see rules.h. Each rule is a function of
 * the input that fills a finding and says whether it fired. */
#include "jobs/rules.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* The samples compared as the start and the end of the run, for
 * GPUMemoryIncrease: quarters of what is kept. */
#define QUARTERS 4

typedef bool (*rule_fn)(const struct rule_input *in, const struct rule_limits *l,
			struct rule_finding *f);

void rules_defaults(struct rule_limits *l)
{
	*l = (struct rule_limits){
		.gpu_low_p95_percent = 70,
		.gpu_low_p5_percent = 10,
		.cpu_high_percent = 90,
		.gpu_idle_percent = 10,
		.io_wait_percent = 50,
		.gpu_memory_increase_percent = 5,
		.step_stddev = 3,
		.memory_near_percent = 90,
		.init_s = 120,
		.quiet_s = 600,
		.min_samples = 10,
		.warmup_s = 20,
	};
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double rules_percentile(double *v, size_t n, double p)
{
	size_t rank;

	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	rank = (size_t)ceil(p / 100.0 * (double)n);
	return v[rank > 0 ? rank - 1 : 0];
}

/* Keeps sample i as evidence while there is room. */
static void cite(struct rule_finding *f, size_t i)
{
	if (f->n_evidence < RULE_EVIDENCE_MAX)
		f->evidence[f->n_evidence++] = i;
}

/* Cites the newest samples taken at or after since_ms (the quiet stretch a
 * time rule saw), oldest of them first. */
static void cite_since(const struct rule_input *in, int64_t since_ms, struct rule_finding *f)
{
	size_t first = in->n_samples;

	while (first > 0 && in->samples[first - 1].at_ms >= since_ms &&
	       in->n_samples - (first - 1) <= RULE_EVIDENCE_MAX)
		first--;
	for (size_t i = first; i < in->n_samples; i++)
		cite(f, i);
}

/* The samples that carry a GPU reading. */
static size_t gpu_samples(const struct rule_input *in)
{
	size_t n = 0;

	for (size_t i = 0; i < in->n_samples; i++)
		n += in->samples[i].gpu_percent >= 0;
	return n;
}

static bool low_gpu(const struct rule_input *in, const struct rule_limits *l,
		    struct rule_finding *f)
{
	size_t n = in->gpu ? gpu_samples(in) : 0, k = 0;
	double *v, p95, p5;
	bool fired;

	if (n < l->min_samples || !(v = malloc(n * sizeof(*v))))
		return false;
	for (size_t i = 0; i < in->n_samples; i++)
		if (in->samples[i].gpu_percent >= 0)
			v[k++] = in->samples[i].gpu_percent;
	p95 = rules_percentile(v, n, 95);
	p5 = rules_percentile(v, n, 5);
	free(v);
	if (p95 < l->gpu_low_p95_percent) {
		snprintf(f->message, sizeof(f->message),
			 "GPU utilisation is low: p95 %.0f %% (under %u %%) over %zu samples", p95,
			 l->gpu_low_p95_percent, n);
		fired = true;
	} else if (p5 < l->gpu_low_p5_percent) {
		snprintf(f->message, sizeof(f->message),
			 "GPU utilisation swings: p95 %.0f %% but p5 %.0f %% (under %u %%)", p95,
			 p5, l->gpu_low_p5_percent);
		fired = true;
	} else {
		return false;
	}
	/* the evidence: the samples at or under the low mark */
	for (size_t i = 0; i < in->n_samples; i++)
		if (in->samples[i].gpu_percent >= 0 &&
		    in->samples[i].gpu_percent <= (p95 < l->gpu_low_p95_percent ? p95 : p5))
			cite(f, i);
	return fired;
}

static bool cpu_bottleneck(const struct rule_input *in, const struct rule_limits *l,
			   struct rule_finding *f)
{
	size_t n = in->gpu ? gpu_samples(in) : 0, hits = 0;

	if (n < l->min_samples)
		return false;
	for (size_t i = 0; i < in->n_samples; i++) {
		const struct rule_sample *s = &in->samples[i];
		if (s->gpu_percent >= 0 && s->gpu_percent < l->gpu_idle_percent &&
		    s->cpu_percent > l->cpu_high_percent) {
			hits++;
			cite(f, i);
		}
	}
	if (hits * 2 <= n)
		return false;
	snprintf(f->message, sizeof(f->message),
		 "CPU over %u %% while the GPU was under %u %% in %zu of %zu samples",
		 l->cpu_high_percent, l->gpu_idle_percent, hits, n);
	return true;
}

static bool io_bottleneck(const struct rule_input *in, const struct rule_limits *l,
			  struct rule_finding *f)
{
	size_t n = 0, hits = 0;

	for (size_t i = 0; i < in->n_samples; i++) {
		if (in->samples[i].io_wait_percent < 0)
			continue;
		n++;
		if (in->samples[i].io_wait_percent > l->io_wait_percent) {
			hits++;
			cite(f, i);
		}
	}
	if (n < l->min_samples || hits * 2 <= n)
		return false;
	snprintf(f->message, sizeof(f->message),
		 "waiting on I/O over %u %% of the time in %zu of %zu samples",
		 l->io_wait_percent, hits, n);
	return true;
}

/* Mean GPU memory of samples [from, to) that have it; -1 when none do. */
static double gpu_memory_mean(const struct rule_input *in, size_t from, size_t to)
{
	double sum = 0;
	size_t n = 0;

	for (size_t i = from; i < to; i++)
		if (in->samples[i].gpu_memory_bytes >= 0) {
			sum += (double)in->samples[i].gpu_memory_bytes;
			n++;
		}
	return n ? sum / (double)n : -1;
}

/* The second quarter of the kept samples against the last: the first
 * quarter is left out, as a job allocates most of its memory as it starts. */
static bool gpu_memory_increase(const struct rule_input *in, const struct rule_limits *l,
				struct rule_finding *f)
{
	size_t n = in->n_samples, q = n / QUARTERS;
	double early, late;

	if (!in->gpu || q == 0 || n < 2 * l->min_samples)
		return false;
	early = gpu_memory_mean(in, q, 2 * q);
	late = gpu_memory_mean(in, n - q, n);
	if (early <= 0 || late < 0 || late <= early * (1 + l->gpu_memory_increase_percent / 100.0))
		return false;
	snprintf(f->message, sizeof(f->message),
		 "GPU memory grew %.0f %% (from %.0f MiB to %.0f MiB; more than %u %%)",
		 (late / early - 1) * 100, early / 1048576, late / 1048576,
		 l->gpu_memory_increase_percent);
	cite(f, q);
	cite(f, n - 1);
	return true;
}

/* Each step against the mean and deviation of all the others (so one
 * outlier does not widen the band it is judged by). */
static bool step_outlier(const struct rule_input *in, const struct rule_limits *l,
			 struct rule_finding *f)
{
	size_t n = in->n_steps, hits = 0;
	double sum = 0, sumsq = 0, worst = 0;

	if (n < l->min_samples)
		return false;
	for (size_t i = 0; i < n; i++) {
		sum += in->steps[i].value;
		sumsq += in->steps[i].value * in->steps[i].value;
	}
	for (size_t i = 0; i < n; i++) {
		double v = in->steps[i].value, m = (sum - v) / (double)(n - 1);
		double var = (sumsq - v * v) / (double)(n - 1) - m * m;
		double sd = var > 0 ? sqrt(var) : 0, dev = fabs(v - m);
		/* a deviation within rounding of a constant series is none */
		if (dev <= 1e-9 * (fabs(m) + 1) || dev <= l->step_stddev * sd)
			continue;
		hits++;
		cite(f, i);
		if (sd > 0 && dev / sd > worst)
			worst = dev / sd;
	}
	if (hits == 0)
		return false;
	f->evidence_steps = true;
	if (worst > 0)
		snprintf(f->message, sizeof(f->message),
			 "%zu of %zu steps beyond %u standard deviations (the worst %.1f)", hits, n,
			 l->step_stddev, worst);
	else
		snprintf(f->message, sizeof(f->message),
			 "%zu of %zu steps differ from an otherwise constant step time", hits, n);
	return true;
}

static bool slow_init(const struct rule_input *in, const struct rule_limits *l,
		      struct rule_finding *f)
{
	int64_t waited_s = (in->now_ms - in->started_ms) / 1000;

	if (in->started_ms <= 0 || in->first_output_ms > 0 || waited_s <= l->init_s)
		return false;
	snprintf(f->message, sizeof(f->message),
		 "no log line and no metric in the first %lld s (limit %lld s)",
		 (long long)waited_s, (long long)l->init_s);
	cite_since(in, in->started_ms, f);
	return true;
}

static bool memory_near_limit(const struct rule_input *in, const struct rule_limits *l,
			      struct rule_finding *f)
{
	size_t hits = 0;
	double worst = 0;

	for (size_t i = 0; i < in->n_samples; i++) {
		const struct rule_sample *s = &in->samples[i];
		double pct;
		if (s->memory_limit_bytes <= 0 || s->memory_bytes < 0)
			continue;
		pct = 100.0 * (double)s->memory_bytes / (double)s->memory_limit_bytes;
		if (pct > l->memory_near_percent) {
			hits++;
			cite(f, i);
			worst = pct > worst ? pct : worst;
		}
	}
	if (hits == 0)
		return false;
	snprintf(f->message, sizeof(f->message),
		 "memory over %u %% of the limit in %zu samples (at most %.0f %%)",
		 l->memory_near_percent, hits, worst);
	return true;
}

static bool no_log_output(const struct rule_input *in, const struct rule_limits *l,
			  struct rule_finding *f)
{
	int64_t since_ms = in->last_output_ms > 0 ? in->last_output_ms : in->started_ms;
	int64_t quiet_s = (in->now_ms - since_ms) / 1000;

	if (since_ms <= 0 || quiet_s <= l->quiet_s)
		return false;
	snprintf(f->message, sizeof(f->message), "no log output for %lld s (limit %lld s)",
		 (long long)quiet_s, (long long)l->quiet_s);
	cite_since(in, since_ms, f);
	return true;
}

/* The rules in order: after_warmup ones judge a run's steady state and
 * leave each run's warm-up out; the others judge every reading (memory
 * near the limit kills in the start-up too) or time itself. */
static const struct {
	const char *name;
	rule_fn fn;
	bool needs_gpu, after_warmup;
	const char *description, *advice;
} rules[] = {
	{"LowGPUUtilization", low_gpu, true, true,
	 "GPU utilisation low (p95) or swinging (p5) after the warm-up",
	 "Give the GPU more work per step or feed it faster: raise the batch size, use more "
	 "DataLoader workers with pin_memory, prefetch the next batches. When utilisation "
	 "swings, look for synchronisation in the loop (.item() or printing every step, copies "
	 "between host and device, checkpoints saved inside the loop)."},
	{"CPUBottleneck", cpu_bottleneck, true, true,
	 "the CPUs busy while the GPU waits, after the warm-up",
	 "The CPUs are the limit while the GPU waits: decode and augment ahead of time or on "
	 "the GPU, give DataLoader workers the cores they need (a larger cpus_milli), and keep "
	 "per-sample Python work out of the loop."},
	{"IOBottleneck", io_bottleneck, false, true,
	 "tasks waiting on I/O for over half the samples, after the warm-up",
	 "The job waits on storage: read the data in larger sequential pieces (sharded "
	 "archives or record files rather than many small files), keep the dataset in memory "
	 "when it fits, prefetch in background workers, and save checkpoints less often."},
	{"GPUMemoryIncrease", gpu_memory_increase, true, true,
	 "GPU memory growing during training (the warm-up's allocation left out)",
	 "GPU memory keeps growing: look for tensors kept across steps (a running loss summed "
	 "without .item() or .detach(), lists of outputs, retained graphs) and for changing "
	 "input shapes that make the allocator keep new blocks; torch.cuda.memory_summary() "
	 "shows where it goes."},
	{"StepOutlier", step_outlier, false, true,
	 "steps far slower than the others, after the warm-up",
	 "Some steps take far longer than the rest: find what runs at those steps (a "
	 "checkpoint, an evaluation, garbage collection, a data loader refilling, a new input "
	 "shape that recompiles or autotunes) and move it out of the step or make it rare."},
	{"SlowInitialization", slow_init, false, false,
	 "no log line and no metric long after the job began training",
	 "Nothing was printed or measured for a long time after the start: check the data "
	 "staging and the imports, and print a line when the training loop begins."},
	{"MemoryNearLimit", memory_near_limit, false, false,
	 "memory close to the job's limit (the start-up counts: it can be killed there too)",
	 "The job is close to its memory limit and may be killed: lower the batch size or the "
	 "loaders' prefetch, stream the dataset instead of loading it whole, or submit with a "
	 "larger memory_bytes when the plan allows."},
	{"NoLogOutput", no_log_output, false, false,
	 "no log output for a long time",
	 "The job printed nothing for a long time and may hang (a deadlock, a stuck read). "
	 "Print progress regularly, unbuffered (python -u or PYTHONUNBUFFERED=1), so a hang "
	 "can be told from slow work."},
};

size_t rules_count(void)
{
	return sizeof(rules) / sizeof(rules[0]);
}

const char *rules_name(size_t i)
{
	return i < rules_count() ? rules[i].name : NULL;
}

const char *rules_description(size_t i)
{
	return i < rules_count() ? rules[i].description : NULL;
}

const char *rules_advice(size_t i)
{
	return i < rules_count() ? rules[i].advice : NULL;
}

bool rules_needs_gpu(size_t i)
{
	return i < rules_count() && rules[i].needs_gpu;
}

bool rules_after_warmup(size_t i)
{
	return i < rules_count() && rules[i].after_warmup;
}

bool rules_in_warmup(const struct rule_input *in, const struct rule_limits *l, int64_t at_ms)
{
	int64_t start = in->started_ms;

	if (in->n_run_starts == 0 && start <= 0 && in->n_samples > 0)
		start = in->samples[0].at_ms;
	/* the latest run begun at or before at_ms opens the warm-up it is in */
	for (size_t i = 0; i < in->n_run_starts && in->run_starts_ms[i] <= at_ms; i++)
		start = in->run_starts_ms[i];
	if (l->warmup_s <= 0)
		return false;
	/* a reading before any run began is no run's steady state either */
	return at_ms < start + l->warmup_s * 1000;
}

/* The readings a warm-up leaves, as an input of their own, and where each
 * is in the whole input (a finding cites the whole input's indices). */
struct judged {
	struct rule_input in;
	struct rule_sample *samples;
	struct rule_point *steps;
	size_t *sample_at, *step_at;
};

static void judged_release(struct judged *j)
{
	free(j->samples);
	free(j->steps);
	free(j->sample_at);
	free(j->step_at);
}

static int judged_init(struct judged *j, const struct rule_input *in, const struct rule_limits *l)
{
	size_t ns = 0, np = 0;

	*j = (struct judged){.in = *in};
	j->samples = malloc((in->n_samples + 1) * sizeof(*j->samples));
	j->sample_at = malloc((in->n_samples + 1) * sizeof(*j->sample_at));
	j->steps = malloc((in->n_steps + 1) * sizeof(*j->steps));
	j->step_at = malloc((in->n_steps + 1) * sizeof(*j->step_at));
	if (!j->samples || !j->sample_at || !j->steps || !j->step_at) {
		judged_release(j);
		return -1;
	}
	for (size_t i = 0; i < in->n_samples; i++)
		if (!rules_in_warmup(in, l, in->samples[i].at_ms)) {
			j->samples[ns] = in->samples[i];
			j->sample_at[ns++] = i;
		}
	for (size_t i = 0; i < in->n_steps; i++)
		if (!rules_in_warmup(in, l, in->steps[i].at_ms)) {
			j->steps[np] = in->steps[i];
			j->step_at[np++] = i;
		}
	j->in.samples = j->samples;
	j->in.n_samples = ns;
	j->in.steps = j->steps;
	j->in.n_steps = np;
	return 0;
}

size_t rules_evaluate(const struct rule_input *in, const struct rule_limits *l,
		      struct rule_finding *out, size_t max)
{
	struct judged j;
	size_t n = 0;

	if (judged_init(&j, in, l) < 0)
		return 0;
	for (size_t i = 0; i < rules_count() && n < max; i++) {
		struct rule_finding *f = &out[n];
		*f = (struct rule_finding){.rule = rules[i].name};
		if (!rules[i].fn(rules[i].after_warmup ? &j.in : in, l, f))
			continue;
		/* cite the readings by their place in the whole input */
		for (size_t k = 0; rules[i].after_warmup && k < f->n_evidence; k++)
			f->evidence[k] = f->evidence_steps ? j.step_at[f->evidence[k]]
							   : j.sample_at[f->evidence[k]];
		n++;
	}
	judged_release(&j);
	return n;
}
