/* Unit tests: the pure parts of job observability - log framing by byte
 * offset (jobs/joblog.c), metric extraction with PCRE2 under its limits
 * (jobs/extract.c) and each profiling rule on a series built to trigger it
 * and on a healthy one (jobs/rules.c). */
#include "unit.h"

#include <errno.h>
#include <math.h>
#include <time.h>

#include "jobs/extract.h"
#include "jobs/joblog.h"
#include "jobs/observe_int.h"
#include "jobs/observe_rules.h"
#include "jobs/rules.h"
#include "sched/gpus.h"

/* ---- log framing ---- */

static void test_next_line(void **state)
{
	size_t n;
	(void)state;
	assert_int_equal(joblog_next_line("ab\ncd", 5, false, &n), 3);
	assert_int_equal(n, 2);
	/* CRLF: the CR is not part of the line */
	assert_int_equal(joblog_next_line("ab\r\n", 4, false, &n), 4);
	assert_int_equal(n, 2);
	/* a partial line waits, unless the log is complete */
	assert_int_equal(joblog_next_line("cd", 2, false, &n), 0);
	assert_int_equal(joblog_next_line("cd", 2, true, &n), 2);
	assert_int_equal(n, 2);
	assert_int_equal(joblog_next_line("", 0, true, &n), 0);
}

static void test_long_line_is_cut(void **state)
{
	size_t len = JOBLOG_LINE_MAX_BYTES + 100, n;
	char *big = malloc(len);
	(void)state;
	assert_non_null(big);
	memset(big, 'x', len);
	/* no newline in sight: cut at the line maximum, not waited for */
	assert_int_equal(joblog_next_line(big, len, false, &n), JOBLOG_LINE_MAX_BYTES);
	assert_int_equal(n, JOBLOG_LINE_MAX_BYTES);
	/* shorter than the maximum and no newline: wait */
	assert_int_equal(joblog_next_line(big, 100, false, &n), 0);
	/* joblog_cut never returns 0 with a whole line ready, even one over budget */
	assert_true(joblog_cut(big, len, false, JOBLOG_EVENT_MAX_BYTES) > 0);
	assert_true(joblog_cut(big, len, false, JOBLOG_EVENT_MAX_BYTES) <= JOBLOG_LINE_MAX_BYTES);
	free(big);
}

static void test_cut_whole_lines(void **state)
{
	const char *log = "l1\nl2\nparti";
	(void)state;
	assert_int_equal(joblog_cut(log, strlen(log), false, 1000), 6);
	assert_int_equal(joblog_cut(log, strlen(log), true, 1000), strlen(log));
	/* budget: each line costs its bytes + 7; "l1\n" = 10, two lines = 20 */
	assert_int_equal(joblog_cut(log, strlen(log), false, 19), 3);
	assert_int_equal(joblog_cut(log, strlen(log), false, 20), 6);
	assert_int_equal(joblog_cut("abc", 3, false, 1000), 0);
}

/* Reading a log in cuts from every possible resume offset that a cut gave
 * yields the bytes exactly once: nothing lost, nothing repeated. */
static void test_resume_exact(void **state)
{
	char log[4096], out[8192];
	size_t len = 0, pos = 0, got = 0;
	(void)state;
	srand(7);
	while (len < sizeof(log) - 200) {
		int n = rand() % 90;
		for (int i = 0; i < n; i++)
			log[len++] = (char)('a' + rand() % 26);
		log[len++] = rand() % 5 ? '\n' : '\r';
	}
	memcpy(log + len, "tail", 4);
	len += 4;
	while (pos < len) {
		/* a reader that sees only up to a random point, as a growing file */
		size_t seen = pos + 1 + (size_t)rand() % 300;
		bool final = seen >= len;
		size_t take = joblog_cut(log + pos, (final ? len : seen) - pos, final, 200);
		if (take == 0)
			continue;
		memcpy(out + got, log + pos, take);
		got += take;
		pos += take; /* the event id: the next reader resumes here */
	}
	assert_int_equal(got, len);
	assert_memory_equal(out, log, len);
}

static void test_log_file(void **state)
{
	char dir[64], path[128], buf[16];
	FILE *f;
	(void)state;
	unit_tempdir(dir);
	snprintf(path, sizeof(path), "%s/1.log", dir);
	/* a missing log is an empty one */
	assert_int_equal(joblog_size(path), 0);
	assert_int_equal(joblog_read(path, 0, buf, sizeof(buf)), 0);
	assert_non_null(f = fopen(path, "w"));
	fputs("hello\nworld\n", f);
	fclose(f);
	assert_int_equal(joblog_size(path), 12);
	assert_int_equal(joblog_read(path, 6, buf, sizeof(buf)), 6);
	assert_memory_equal(buf, "world\n", 6);
	assert_int_equal(joblog_read(path, 12, buf, sizeof(buf)), 0);
	unit_rmdir(dir);
}

/* ---- metric extraction ---- */

struct got {
	double v[8];
	size_t def[8];
	int n;
};

static void on_point(void *ctx, size_t def, const char *name, double value)
{
	struct got *g = ctx;
	(void)name;
	g->def[g->n] = def;
	g->v[g->n++] = value;
}

static void test_group_or_whole_match(void **state)
{
	struct extract_set *s = extract_new();
	struct got g = {0};
	char err[200];
	(void)state;
	assert_int_equal(extract_add(s, "loss", "loss[=:] *([0-9.eE+-]+)", err, sizeof(err)), 0);
	/* no group: the whole match is the value */
	assert_int_equal(extract_add(s, "acc", "(?<=acc=)[0-9.]+", err, sizeof(err)), 0);
	const char *line = "step 3 loss=0.25 acc=0.75";
	assert_int_equal(extract_line(s, line, strlen(line), on_point, &g), 2);
	assert_true(g.v[0] == 0.25 && g.def[0] == 0);
	assert_true(g.v[1] == 0.75 && g.def[1] == 1);
	/* a non-number is no point */
	g.n = 0;
	line = "loss=nan acc=x";
	assert_int_equal(extract_line(s, line, strlen(line), on_point, &g), 0);
	line = "loss: 1e-3";
	assert_int_equal(extract_line(s, line, strlen(line), on_point, &g), 1);
	assert_true(fabs(g.v[0] - 0.001) < 1e-12);
	/* invalid UTF-8 in a line does not fail the match */
	g.n = 0;
	line = "\xff\xfe loss=2";
	assert_int_equal(extract_line(s, line, strlen(line), on_point, &g), 1);
	assert_true(g.v[0] == 2);
	extract_free(s);
}

static void test_bad_regex(void **state)
{
	struct extract_set *s = extract_new();
	char err[200] = "", long_re[EXTRACT_REGEX_MAX + 2];
	(void)state;
	assert_int_equal(extract_add(s, "x", "loss=(", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "offset"));
	assert_int_equal(extract_check("(a", err, sizeof(err)), -EINVAL);
	assert_int_equal(extract_check("a(b)c", err, sizeof(err)), 0);
	memset(long_re, 'a', sizeof(long_re) - 1);
	long_re[sizeof(long_re) - 1] = '\0';
	assert_int_equal(extract_check(long_re, err, sizeof(err)), -EINVAL);
	assert_int_equal(extract_count(s), 0);
	for (int i = 0; i < EXTRACT_MAX_DEFS; i++)
		assert_int_equal(extract_add(s, "m", "m", err, sizeof(err)), 0);
	assert_int_equal(extract_add(s, "m", "m", err, sizeof(err)), -E2BIG);
	extract_free(s);
}

/* A catastrophic regex on a long line gives up within the match limit:
 * bounded time, no point, counted. */
static void test_hostile_regex_is_bounded(void **state)
{
	struct extract_set *s = extract_new();
	struct got g = {0};
	char err[200], line[JOBLOG_LINE_MAX_BYTES];
	struct timespec a, b;
	(void)state;
	assert_int_equal(extract_add(s, "evil", "^(a+)+$", err, sizeof(err)), 0);
	assert_int_equal(extract_add(s, "evil2", "(a|aa)*(a|aa)*(a|aa)*c", err, sizeof(err)), 0);
	memset(line, 'a', sizeof(line) - 1);
	line[sizeof(line) - 1] = 'b';
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < 10; i++)
		assert_int_equal(extract_line(s, line, sizeof(line), on_point, &g), 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	/* the one that hits the limit (PCRE2 fails evil2 at once: no "c" in the
	 * line) is dropped after EXTRACT_DROP_AFTER limited lines */
	assert_int_equal(extract_limited(s), EXTRACT_DROP_AFTER);
	assert_int_equal(extract_dropped(s), 1);
	assert_int_equal(extract_matching(s), 1);
	/* ten hostile lines in well under a second (unlimited: years) */
	assert_true((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < 1000);
	extract_free(s);
}

static void count_point(void *ctx, size_t def, const char *name, double value)
{
	(void)def, (void)name, (void)value;
	(*(long *)ctx)++;
}

/* A flood of near-matching lines under 39 definitions that hit the match
 * limit on each: every one is dropped after EXTRACT_DROP_AFTER lines, so the
 * flood costs a few limited lines per definition (kept: about 10 ms a line,
 * 1000 s for these), and a definition that matches goes on giving points. */
static void test_flood_drops_what_keeps_hitting_the_limit(void **state)
{
	struct extract_set *s = extract_new();
	const char *line = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa! 7";
	char err[200], name[8];
	struct timespec a, b;
	long points = 0;
	(void)state;
	for (int i = 0; i < EXTRACT_MAX_DEFS - 1; i++) {
		snprintf(name, sizeof(name), "m%02d", i);
		assert_int_equal(extract_add(s, name, "(a|aa)+$", err, sizeof(err)), 0);
	}
	assert_int_equal(extract_add(s, "n", "([0-9]+)$", err, sizeof(err)), 0);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < 100000; i++)
		extract_line(s, line, strlen(line), count_point, &points);
	clock_gettime(CLOCK_MONOTONIC, &b);
	assert_int_equal(points, 100000);
	assert_int_equal(extract_limited(s), EXTRACT_DROP_AFTER);
	assert_int_equal(extract_dropped(s), (1ULL << (EXTRACT_MAX_DEFS - 1)) - 1);
	assert_int_equal(extract_matching(s), 1);
	assert_true((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < 5000);
	extract_free(s);
	/* a definition dropped before (a restart) is not matched again */
	s = extract_new();
	points = 0;
	assert_int_equal(extract_add(s, "n", "([0-9]+)$", err, sizeof(err)), 0);
	extract_drop(s, 0);
	assert_int_equal(extract_line(s, line, strlen(line), count_point, &points), 0);
	assert_int_equal(extract_matching(s), 0);
	extract_free(s);
}

static void test_number(void **state)
{
	double v;
	(void)state;
	assert_int_equal(extract_number(" 1.5 ", 5, &v), 0);
	assert_true(v == 1.5);
	assert_int_equal(extract_number("-2e3", 4, &v), 0);
	assert_true(v == -2000);
	assert_int_equal(extract_number("inf", 3, &v), -EINVAL);
	assert_int_equal(extract_number("1.5x", 4, &v), -EINVAL);
	assert_int_equal(extract_number("", 0, &v), -EINVAL);
	assert_int_equal(extract_number("1e999", 5, &v), -EINVAL);
}

/* ---- profiling rules ---- */

#define N 40

struct series {
	struct rule_sample s[N];
	struct rule_point p[N];
	struct rule_input in;
	struct rule_limits l;
};

/* A healthy GPU job: busy GPU, moderate CPU, little I/O wait, memory at
 * half its limit, steady steps, output all along. */
static void healthy(struct series *x, bool gpu)
{
	memset(x, 0, sizeof(*x));
	rules_defaults(&x->l);
	x->l.warmup_s = 0; /* these series judge every sample: the warm-up has its own tests */
	for (int i = 0; i < N; i++) {
		x->s[i] = (struct rule_sample){
			.at_ms = 1000 * i,
			.cpu_percent = 60 + i % 5,
			.io_wait_percent = 3,
			.memory_bytes = 1 << 30,
			.memory_limit_bytes = 2LL << 30,
			.gpu_percent = gpu ? 90 + i % 7 : -1,
			.gpu_memory_bytes = gpu ? (4LL << 30) + (i % 3) * 1000 : -1,
		};
		x->p[i] = (struct rule_point){.at_ms = 1000 * i, .value = 0.5 + (i % 4) * 0.01};
	}
	x->in = (struct rule_input){.samples = x->s, .n_samples = N, .gpu = gpu, .steps = x->p,
				    .n_steps = N, .started_ms = 1, .now_ms = 60000,
				    .first_output_ms = 2000, .last_output_ms = 59000};
}

/* The rules that fire, as one comma-separated string. */
static const char *fired(struct series *x, char *out, size_t len)
{
	struct rule_finding f[16];
	size_t n = rules_evaluate(&x->in, &x->l, f, 16);

	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		size_t at = strlen(out);
		snprintf(out + at, len - at, "%s%s", i ? "," : "", f[i].rule);
		assert_true(f[i].message[0] != '\0');
	}
	return out;
}

static void test_rules_quiet_when_healthy(void **state)
{
	struct series x;
	char got[256];
	(void)state;
	healthy(&x, true);
	assert_string_equal(fired(&x, got, sizeof(got)), "");
	healthy(&x, false);
	assert_string_equal(fired(&x, got, sizeof(got)), "");
	/* too few samples: the sample rules wait */
	healthy(&x, true);
	for (int i = 0; i < N; i++)
		x.s[i].gpu_percent = 1;
	x.in.n_samples = 5;
	assert_string_equal(fired(&x, got, sizeof(got)), "");
}

static void test_low_gpu(void **state)
{
	struct series x;
	char got[256];
	(void)state;
	healthy(&x, true);
	for (int i = 0; i < N; i++)
		x.s[i].gpu_percent = 40 + i % 10;
	assert_string_equal(fired(&x, got, sizeof(got)), "LowGPUUtilization");
	/* p95 high but p5 under 10 %: it swings */
	healthy(&x, true);
	for (int i = 0; i < N; i += 5)
		x.s[i].gpu_percent = 2;
	assert_string_equal(fired(&x, got, sizeof(got)), "LowGPUUtilization");
	/* a CPU job never gets GPU findings */
	healthy(&x, false);
	for (int i = 0; i < N; i++)
		x.s[i].gpu_percent = 1;
	x.in.gpu = false;
	assert_string_equal(fired(&x, got, sizeof(got)), "");
}

static void test_cpu_bottleneck(void **state)
{
	struct series x;
	char got[256];
	struct rule_finding f[16];
	(void)state;
	healthy(&x, true);
	for (int i = 0; i < N; i++) {
		x.s[i].cpu_percent = 97;
		x.s[i].gpu_percent = i < N / 2 + 2 ? 3 : 95;
	}
	/* the GPU idles too: low utilisation fires beside it */
	assert_string_equal(fired(&x, got, sizeof(got)), "LowGPUUtilization,CPUBottleneck");
	/* exactly half is not over half */
	for (int i = 0; i < N; i++)
		x.s[i].gpu_percent = i < N / 2 ? 3 : 95;
	size_t n = rules_evaluate(&x.in, &x.l, f, 16);
	for (size_t i = 0; i < n; i++)
		assert_string_not_equal(f[i].rule, "CPUBottleneck");
}

static void test_io_bottleneck(void **state)
{
	struct series x;
	char got[256];
	struct rule_finding f[16];
	(void)state;
	healthy(&x, false);
	for (int i = 0; i < N; i++)
		x.s[i].io_wait_percent = i % 4 ? 70 : 10;
	assert_string_equal(fired(&x, got, sizeof(got)), "IOBottleneck");
	assert_int_equal(rules_evaluate(&x.in, &x.l, f, 16), 1);
	/* the evidence: samples over the threshold, at most RULE_EVIDENCE_MAX */
	assert_int_equal(f[0].n_evidence, RULE_EVIDENCE_MAX);
	assert_true(x.s[f[0].evidence[0]].io_wait_percent > 50);
}

static void test_gpu_memory_increase(void **state)
{
	struct series x;
	char got[256];
	(void)state;
	healthy(&x, true);
	for (int i = 0; i < N; i++)
		x.s[i].gpu_memory_bytes = (4LL << 30) + (int64_t)i * (200LL << 20);
	assert_string_equal(fired(&x, got, sizeof(got)), "GPUMemoryIncrease");
	/* a big allocation at the start is not growth */
	healthy(&x, true);
	for (int i = 0; i < N / 4; i++)
		x.s[i].gpu_memory_bytes = (int64_t)i << 28;
	assert_string_equal(fired(&x, got, sizeof(got)), "");
}

static void test_step_outlier(void **state)
{
	struct series x;
	char got[256];
	struct rule_finding f[16];
	(void)state;
	healthy(&x, false);
	x.p[17].value = 5;
	assert_string_equal(fired(&x, got, sizeof(got)), "StepOutlier");
	assert_int_equal(rules_evaluate(&x.in, &x.l, f, 16), 1);
	assert_true(f[0].evidence_steps);
	assert_int_equal(f[0].n_evidence, 1);
	assert_int_equal(f[0].evidence[0], 17);
	/* a constant series with one different step */
	for (int i = 0; i < N; i++)
		x.p[i].value = 1;
	x.p[3].value = 1.5;
	assert_string_equal(fired(&x, got, sizeof(got)), "StepOutlier");
	/* within 3 sigma: quiet */
	healthy(&x, false);
	x.p[5].value = 0.54;
	assert_string_equal(fired(&x, got, sizeof(got)), "");
}

static void test_slow_init_and_quiet(void **state)
{
	struct series x;
	char got[256];
	(void)state;
	healthy(&x, false);
	x.in.first_output_ms = x.in.last_output_ms = 0;
	x.in.now_ms = x.in.started_ms + 100 * 1000;
	assert_string_equal(fired(&x, got, sizeof(got)), "");
	x.in.now_ms = x.in.started_ms + 121 * 1000;
	assert_string_equal(fired(&x, got, sizeof(got)), "SlowInitialization");
	/* its evidence: the newest samples of the silent stretch, in order */
	struct rule_finding f[4];
	assert_int_equal(rules_evaluate(&x.in, &x.l, f, 4), 1);
	assert_int_equal(f[0].n_evidence, RULE_EVIDENCE_MAX);
	assert_int_equal(f[0].evidence[0], N - RULE_EVIDENCE_MAX);
	assert_int_equal(f[0].evidence[RULE_EVIDENCE_MAX - 1], N - 1);
	/* never any output, for over quiet_s: both */
	x.in.now_ms = x.in.started_ms + 601 * 1000;
	assert_string_equal(fired(&x, got, sizeof(got)), "SlowInitialization,NoLogOutput");
	/* output at the start, then silence */
	healthy(&x, false);
	x.in.last_output_ms = 5000;
	x.in.now_ms = 5000 + 600 * 1000;
	assert_string_equal(fired(&x, got, sizeof(got)), "");
	x.in.now_ms = 5000 + 601 * 1000;
	assert_string_equal(fired(&x, got, sizeof(got)), "NoLogOutput");
}

static void test_memory_near_limit(void **state)
{
	struct series x;
	char got[256];
	(void)state;
	healthy(&x, false);
	x.s[N - 1].memory_bytes = (int64_t)(0.95 * (double)(2LL << 30));
	assert_string_equal(fired(&x, got, sizeof(got)), "MemoryNearLimit");
	x.s[N - 1].memory_bytes = (int64_t)(0.89 * (double)(2LL << 30));
	assert_string_equal(fired(&x, got, sizeof(got)), "");
}

static void test_percentile(void **state)
{
	double v[] = {5, 1, 4, 2, 3, 10, 9, 8, 7, 6};
	(void)state;
	assert_true(rules_percentile(v, 10, 95) == 10);
	assert_true(rules_percentile(v, 10, 5) == 1);
	assert_true(rules_percentile(v, 10, 50) == 5);
	assert_true(rules_percentile(v, 0, 50) == 0);
}

/* ---- a GPU job's reading: its pool's GPUs only ---- */

static void test_gpu_reading(void **state)
{
	struct gpu_info info[3] = {
		{.id = 0, .utilization_percent = 80, .memory_used_bytes = 1000},
		{.id = 1, .utilization_percent = 40, .memory_used_bytes = 500},
		{.id = 2, .utilization_percent = 0, .memory_used_bytes = 7},
	};
	double pct;
	int64_t mem;
	(void)state;
	observe_gpu_reading(info, 3, "0,1", &pct, &mem);
	assert_true(pct == 60 && mem == 1500);
	observe_gpu_reading(info, 3, "2", &pct, &mem);
	assert_true(pct == 0 && mem == 7);
	/* not read (no NVML: -1), or not the job's: unknown */
	info[1].utilization_percent = -1;
	info[1].memory_used_bytes = -1;
	observe_gpu_reading(info, 3, "1", &pct, &mem);
	assert_true(pct == -1 && mem == -1);
	observe_gpu_reading(info, 3, "", &pct, &mem);
	assert_true(pct == -1 && mem == -1);
	observe_gpu_reading(info, 3, "5", &pct, &mem);
	assert_true(pct == -1 && mem == -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_next_line),
		cmocka_unit_test(test_long_line_is_cut),
		cmocka_unit_test(test_cut_whole_lines),
		cmocka_unit_test(test_resume_exact),
		cmocka_unit_test(test_log_file),
		cmocka_unit_test(test_group_or_whole_match),
		cmocka_unit_test(test_bad_regex),
		cmocka_unit_test(test_hostile_regex_is_bounded),
		cmocka_unit_test(test_flood_drops_what_keeps_hitting_the_limit),
		cmocka_unit_test(test_number),
		cmocka_unit_test(test_rules_quiet_when_healthy),
		cmocka_unit_test(test_low_gpu),
		cmocka_unit_test(test_cpu_bottleneck),
		cmocka_unit_test(test_io_bottleneck),
		cmocka_unit_test(test_gpu_memory_increase),
		cmocka_unit_test(test_step_outlier),
		cmocka_unit_test(test_slow_init_and_quiet),
		cmocka_unit_test(test_memory_near_limit),
		cmocka_unit_test(test_percentile),
		cmocka_unit_test(test_gpu_reading),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
