/* Unit tests: the profiling rules (jobs/rules.c) over the series recorded
 * from a real training job on an NVIDIA H200 (tests/fixtures/gpu-h200-job.json:
 * the job, its metrics and its 35 samples as labd's API returned them).
 * That healthy job ran at the host's throughput, yet LowGPUUtilization
 * and GPUMemoryIncrease fired on it: its first 13 s (CUDA start-up,
 * autotuning) read 0 % GPU and a growing allocation. Here: no finding on
 * the recording with the default warm-up, the same findings as the real
 * run without one, and each rule fired by the same series changed the way
 * a real fault would change it (the GPU starved mid-run, the CPUs or the
 * disk the bottleneck, a memory leak, a slow step, a retry's start-up). */
#include "unit.h"

#include <jansson.h>
#include <libgen.h>
#include <time.h>

#include "jobs/rules.h"

#define FIXTURE "gpu-h200-job.json"
#define MAX_SAMPLES 128
#define MAX_STEPS 128

static char fixture_path[1024];

/* The recorded job as the rules read it. */
struct recording {
	struct rule_sample s[MAX_SAMPLES];
	struct rule_point p[MAX_STEPS];
	int64_t runs[4];
	struct rule_input in;
	struct rule_limits l;
};

/* "2026-12-04T11:57:41.148Z" -> epoch ms. */
static int64_t at_ms(const char *t)
{
	struct tm tm = {0};
	unsigned ms = 0;

	assert_non_null(t);
	assert_non_null(strptime(t, "%Y-%m-%dT%H:%M:%S", &tm));
	if (strlen(t) > 20)
		assert_int_equal(sscanf(t + 20, "%3u", &ms), 1);
	return (int64_t)timegm(&tm) * 1000 + ms;
}

static double reading(json_t *v)
{
	return json_is_number(v) ? json_number_value(v) : -1;
}

static void load(struct recording *r)
{
	json_error_t err;
	json_t *root = json_load_file(fixture_path, 0, &err), *v, *job;
	json_t *samples;
	size_t i;

	if (!root)
		fail_msg("cannot read %s: %s", fixture_path, err.text);
	memset(r, 0, sizeof(*r));
	rules_defaults(&r->l);
	job = json_object_get(root, "job");
	samples = json_object_get(json_object_get(root, "samples"), "samples");
	assert_true(json_array_size(samples) > 0 && json_array_size(samples) <= MAX_SAMPLES);
	json_array_foreach(samples, i, v) {
		r->s[i] = (struct rule_sample){
			.at_ms = at_ms(json_string_value(json_object_get(v, "at"))),
			.cpu_percent = reading(json_object_get(v, "cpu_percent")),
			.io_wait_percent = reading(json_object_get(v, "io_wait_percent")),
			.memory_bytes = (int64_t)reading(json_object_get(v, "memory_bytes")),
			.memory_limit_bytes = (int64_t)reading(json_object_get(v, "memory_limit_bytes")),
			.gpu_percent = reading(json_object_get(v, "gpu_percent")),
			.gpu_memory_bytes = (int64_t)reading(json_object_get(v, "gpu_memory_bytes")),
		};
		/* output: the log grew since the sample before */
		int64_t log = json_integer_value(json_object_get(v, "log_bytes"));
		if (log > 0 && !r->in.first_output_ms)
			r->in.first_output_ms = r->s[i].at_ms;
		if (i > 0 && log > json_integer_value(json_object_get(
					  json_array_get(samples, i - 1), "log_bytes")))
			r->in.last_output_ms = r->s[i].at_ms;
	}
	r->in.n_samples = json_array_size(samples);
	json_array_foreach(json_object_get(job, "transitions"), i, v)
		if (strcmp(json_string_value(json_object_get(v, "status")), "Training") == 0)
			r->runs[r->in.n_run_starts++] =
				at_ms(json_string_value(json_object_get(v, "start_at")));
	assert_int_equal(r->in.n_run_starts, 1);
	r->in.samples = r->s;
	r->in.gpu = strcmp(json_string_value(json_object_get(job, "type")), "gpu") == 0;
	r->in.run_starts_ms = r->runs;
	r->in.started_ms = r->runs[0];
	r->in.now_ms = at_ms(json_string_value(json_object_get(job, "ended_at")));
	/* the job prints no step time (its metrics are loss and samples_per_s) */
	r->in.steps = r->p;
	r->in.n_steps = 0;
	json_decref(root);
}

/* Seconds from the run's start to sample i. */
static double since_start_s(const struct recording *r, size_t i)
{
	return (double)(r->s[i].at_ms - r->runs[0]) / 1000;
}

/* The rules that fire, comma-separated; the findings in f when given. */
static const char *fired(struct recording *r, char *out, size_t len, struct rule_finding *f)
{
	struct rule_finding own[16];
	size_t n;

	f = f ? f : own;
	n = rules_evaluate(&r->in, &r->l, f, 16);
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		size_t at = strlen(out);
		snprintf(out + at, len - at, "%s%s", i ? "," : "", f[i].rule);
		assert_true(f[i].message[0] != '\0');
	}
	return out;
}

/* What the recording is: a GPU job whose GPU idled 13 s before training. */
static void test_recording_is_the_h200_run(void **state)
{
	struct recording r;
	(void)state;
	load(&r);
	assert_true(r.in.gpu);
	assert_int_equal(r.in.n_samples, 35);
	assert_true(r.s[12].gpu_percent == 0 && r.s[13].gpu_percent > 0);
	assert_true(since_start_s(&r, 13) > 12.9 && since_start_s(&r, 13) < 13.1);
	/* the default warm-up covers that start-up with room to spare */
	assert_true(r.l.warmup_s * 1000 > r.s[13].at_ms - r.runs[0]);
}

static void test_no_finding_on_the_recording(void **state)
{
	struct recording r;
	char got[256];
	(void)state;
	load(&r);
	assert_string_equal(fired(&r, got, sizeof(got), NULL), "");
}

/* Without a warm-up the rules say what they said on the H200: the two
 * false findings this recording is kept for. */
static void test_without_warmup_the_false_findings_return(void **state)
{
	struct recording r;
	struct rule_finding f[16];
	char got[256];
	(void)state;
	load(&r);
	r.l.warmup_s = 0;
	assert_string_equal(fired(&r, got, sizeof(got), f), "LowGPUUtilization,GPUMemoryIncrease");
	assert_non_null(strstr(f[0].message, "p5 0 %"));
	/* its evidence: the start-up's idle samples */
	for (size_t k = 0; k < f[0].n_evidence; k++)
		assert_true(since_start_s(&r, f[0].evidence[k]) < 13);
}

/* The GPU starved for 6 s in the middle of training: the swing is real. */
static void test_gpu_starved_mid_run_fires(void **state)
{
	struct recording r;
	struct rule_finding f[16];
	char got[256];
	size_t starved = 0;
	(void)state;
	load(&r);
	for (size_t i = 0; i < r.in.n_samples; i++)
		if (since_start_s(&r, i) >= 24 && since_start_s(&r, i) < 30) {
			r.s[i].gpu_percent = 0;
			starved++;
		}
	assert_int_equal(starved, 6);
	assert_string_equal(fired(&r, got, sizeof(got), f), "LowGPUUtilization");
	assert_non_null(strstr(f[0].message, "swings"));
	/* the evidence is the starved stretch, cited by its place in the recording */
	assert_int_equal(f[0].n_evidence, starved);
	for (size_t k = 0; k < f[0].n_evidence; k++) {
		double s = since_start_s(&r, f[0].evidence[k]);
		assert_true(s >= 24 && s < 30);
		assert_true(r.s[f[0].evidence[k]].gpu_percent == 0);
	}
	/* starved through all of training: low, not swinging */
	load(&r);
	for (size_t i = 13; i < r.in.n_samples; i++)
		r.s[i].gpu_percent = 5;
	assert_string_equal(fired(&r, got, sizeof(got), f), "LowGPUUtilization");
	assert_non_null(strstr(f[0].message, "low"));
}

/* The CPUs busy while the GPU waits: a bottleneck after the warm-up, the
 * start-up of a one-CPU job (an interpreter importing at 100 %) none. */
static void test_cpu_bottleneck(void **state)
{
	struct recording r;
	char got[256];
	(void)state;
	load(&r);
	for (size_t i = 0; i < 13; i++)
		r.s[i].cpu_percent = 100;
	assert_string_equal(fired(&r, got, sizeof(got), NULL), "");
	for (size_t i = 13; i < r.in.n_samples; i++) {
		r.s[i].cpu_percent = 97;
		r.s[i].gpu_percent = 4;
	}
	assert_string_equal(fired(&r, got, sizeof(got), NULL), "LowGPUUtilization,CPUBottleneck");
	/* a 25 s run of that one-CPU start-up: the warm-up keeps it from being judged
	 * (without one, 13 of 25 samples are "CPU busy, GPU idle") */
	load(&r);
	for (size_t i = 0; i < 13; i++)
		r.s[i].cpu_percent = 100;
	r.in.n_samples = 25;
	assert_string_equal(fired(&r, got, sizeof(got), NULL), "");
	r.l.warmup_s = 0;
	assert_string_equal(fired(&r, got, sizeof(got), NULL),
			    "LowGPUUtilization,CPUBottleneck,GPUMemoryIncrease");
}

/* Waiting on the disk: a bottleneck while training, the dataset's first
 * read at the start none. */
static void test_io_bottleneck(void **state)
{
	struct recording r;
	char got[256];
	(void)state;
	load(&r);
	for (size_t i = 1; i < 13; i++)
		r.s[i].io_wait_percent = 80;
	assert_string_equal(fired(&r, got, sizeof(got), NULL), "");
	r.in.n_samples = 24;
	r.l.warmup_s = 0;
	assert_string_equal(fired(&r, got, sizeof(got), NULL),
			    "LowGPUUtilization,IOBottleneck,GPUMemoryIncrease");
	load(&r);
	for (size_t i = 13; i < r.in.n_samples; i++)
		r.s[i].io_wait_percent = 70;
	assert_string_equal(fired(&r, got, sizeof(got), NULL), "IOBottleneck");
}

/* The recording's training stretch repeated to 70 s (GPUMemoryIncrease
 * needs 2 x rules_min_samples judged samples): steady memory is quiet, a
 * leak of 1 % a second is found. */
static void extend(struct recording *r)
{
	size_t n = r->in.n_samples;

	for (size_t i = 14; i < 34 && n < MAX_SAMPLES; i++) {
		r->s[n] = r->s[i];
		r->s[n].at_ms = r->s[n - 1].at_ms + 1000;
		n++;
	}
	for (size_t i = 14; i < 34 && n < MAX_SAMPLES; i++) {
		r->s[n] = r->s[i];
		r->s[n].at_ms = r->s[n - 1].at_ms + 1000;
		n++;
	}
	r->in.n_samples = n;
	r->in.now_ms = r->s[n - 1].at_ms;
	r->in.last_output_ms = r->in.now_ms;
}

static void test_gpu_memory_increase(void **state)
{
	struct recording r;
	char got[256];
	size_t base;
	(void)state;
	load(&r);
	extend(&r);
	assert_int_equal(r.in.n_samples, 75);
	assert_string_equal(fired(&r, got, sizeof(got), NULL), "");
	base = 35;
	for (size_t i = base; i < r.in.n_samples; i++)
		r.s[i].gpu_memory_bytes = r.s[13].gpu_memory_bytes +
					  (int64_t)(i - base) * (r.s[13].gpu_memory_bytes / 100);
	assert_string_equal(fired(&r, got, sizeof(got), NULL), "GPUMemoryIncrease");
}

/* Step times at the recorded loss points' times: the first steps slow
 * (autotuning) inside the warm-up, then steady; one slow step later is an
 * outlier, cited by its place in the whole series. */
static void test_step_outlier(void **state)
{
	struct recording r;
	struct rule_finding f[16];
	json_t *root = json_load_file(fixture_path, 0, NULL), *loss, *v;
	char got[256];
	size_t i, slow = 0;
	(void)state;
	load(&r);
	assert_non_null(root);
	loss = json_object_get(json_object_get(json_object_get(root, "metrics"), "metrics"), "loss");
	assert_true(json_array_size(loss) > 40 && json_array_size(loss) <= MAX_STEPS);
	json_array_foreach(loss, i, v) {
		r.p[i].at_ms = at_ms(json_string_value(json_object_get(v, "at")));
		r.p[i].value = i < 3 ? 2.5 : 0.25 + (double)(i % 5) * 0.002;
	}
	r.in.n_steps = json_array_size(loss);
	json_decref(root);
	assert_true(r.p[0].at_ms - r.runs[0] < 20000);
	assert_string_equal(fired(&r, got, sizeof(got), NULL), "");
	r.l.warmup_s = 0;
	assert_string_equal(fired(&r, got, sizeof(got), NULL),
			    "LowGPUUtilization,GPUMemoryIncrease,StepOutlier");
	r.l.warmup_s = 20;
	for (i = 0; i < r.in.n_steps && r.p[i].at_ms - r.runs[0] < 28000; i++)
		;
	slow = i;
	r.p[slow].value = 1.5;
	assert_string_equal(fired(&r, got, sizeof(got), f), "StepOutlier");
	assert_true(f[0].evidence_steps);
	assert_int_equal(f[0].n_evidence, 1);
	assert_int_equal(f[0].evidence[0], slow);
}

/* Memory near the limit counts in the start-up too: a job killed there is
 * as dead. */
static void test_memory_near_limit_counts_the_startup(void **state)
{
	struct recording r;
	struct rule_finding f[16];
	char got[256];
	(void)state;
	load(&r);
	r.s[9].memory_bytes = r.s[9].memory_limit_bytes / 100 * 95;
	assert_string_equal(fired(&r, got, sizeof(got), f), "MemoryNearLimit");
	assert_int_equal(f[0].evidence[0], 9);
}

/* A retry starts the command again: its start-up is a warm-up too. */
static void test_each_run_has_its_warmup(void **state)
{
	struct recording r;
	char got[256];
	size_t n;
	(void)state;
	load(&r);
	n = r.in.n_samples;
	/* the attempt again, 40 s later */
	for (size_t i = 0; i < n; i++) {
		r.s[n + i] = r.s[i];
		r.s[n + i].at_ms += 40000;
	}
	r.in.n_samples = 2 * n;
	r.in.now_ms += 40000;
	r.in.last_output_ms += 40000;
	r.runs[1] = r.runs[0] + 40000;
	r.in.n_run_starts = 2;
	assert_string_equal(fired(&r, got, sizeof(got), NULL), "");
	/* the retry's start-up judged: its idle GPU and its allocation */
	r.in.n_run_starts = 1;
	assert_string_equal(fired(&r, got, sizeof(got), NULL), "LowGPUUtilization,GPUMemoryIncrease");
	/* rules_in_warmup: before any run, in each run's first seconds, not after */
	r.in.n_run_starts = 2;
	assert_true(rules_in_warmup(&r.in, &r.l, r.runs[0] - 1));
	assert_true(rules_in_warmup(&r.in, &r.l, r.runs[1] + 19999));
	assert_false(rules_in_warmup(&r.in, &r.l, r.runs[0] + 20000));
	assert_false(rules_in_warmup(&r.in, &r.l, r.runs[1] + 20000));
	r.l.warmup_s = 0;
	assert_false(rules_in_warmup(&r.in, &r.l, r.runs[1] + 1));
}

/* Every rule says what it looks at and what to do about it. */
static void test_every_rule_has_advice(void **state)
{
	(void)state;
	for (size_t i = 0; i < rules_count(); i++) {
		assert_non_null(rules_description(i));
		assert_true(strlen(rules_advice(i)) > 40);
	}
	assert_null(rules_advice(rules_count()));
	assert_true(rules_needs_gpu(0) && rules_after_warmup(0));
	assert_false(rules_after_warmup(rules_count() - 1));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_recording_is_the_h200_run),
		cmocka_unit_test(test_no_finding_on_the_recording),
		cmocka_unit_test(test_without_warmup_the_false_findings_return),
		cmocka_unit_test(test_gpu_starved_mid_run_fires),
		cmocka_unit_test(test_cpu_bottleneck),
		cmocka_unit_test(test_io_bottleneck),
		cmocka_unit_test(test_gpu_memory_increase),
		cmocka_unit_test(test_step_outlier),
		cmocka_unit_test(test_memory_near_limit_counts_the_startup),
		cmocka_unit_test(test_each_run_has_its_warmup),
		cmocka_unit_test(test_every_rule_has_advice),
	};
	char self[1024];

	(void)argc;
	/* run from the repository (make test) or anywhere, by the binary's place
	 * ($BUILD/tests/test_observe_fixture) */
	snprintf(fixture_path, sizeof(fixture_path), "tests/fixtures/" FIXTURE);
	if (access(fixture_path, R_OK) != 0) {
		snprintf(self, sizeof(self), "%s", argv[0]);
		snprintf(fixture_path, sizeof(fixture_path), "%s/../../tests/fixtures/" FIXTURE,
			 dirname(self));
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
