/* rules.h - the profiling rules (docs/jobs.md "Profiling rules"): pure
 * functions over a running job's samples and step-time metric that say
 * what looks wrong, with the samples that show it. Thresholds come from
 * [jobs] rules_* (defaults after the managed-training built-in rules).
 *
 * The warm-up: the first warmup_s of each run of the job's command
 * (interpreter start, CUDA context, cuDNN autotuning, the first batches
 * loaded) is not judged by the rules that compare a run's steady state
 * (utilisation, I/O wait, GPU memory growth, step times): on a real H200
 * job the GPU read 0 % for the first 13 s of a healthy run. */
#ifndef LABD_JOBS_RULES_H
#define LABD_JOBS_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One sample as the rules read it; a percent of -1 (or bytes of -1) is unknown. */
struct rule_sample {
	int64_t at_ms;
	double cpu_percent;     /* of the job's CPUs: 100 = all of them busy */
	double io_wait_percent; /* of wall time the job's tasks waited on I/O */
	int64_t memory_bytes, memory_limit_bytes;
	double gpu_percent;          /* GPU jobs with NVML, else -1 */
	int64_t gpu_memory_bytes;    /* likewise */
};

struct rule_point {
	int64_t at_ms;
	double value;
};

struct rule_input {
	const struct rule_sample *samples; /* oldest first */
	size_t n_samples;
	bool gpu;                          /* a GPU job: the GPU rules apply */
	const struct rule_point *steps;    /* the step-time metric, oldest first */
	size_t n_steps;
	int64_t started_ms;     /* the job began training */
	/* when each run of the command began (an attempt's Training), oldest
	 * first; none: started_ms. Each opens a warm-up. */
	const int64_t *run_starts_ms;
	size_t n_run_starts;
	int64_t now_ms;
	int64_t first_output_ms; /* first log line or metric point; 0 none yet */
	int64_t last_output_ms;  /* latest log output; 0 none yet */
};

struct rule_limits {
	unsigned gpu_low_p95_percent;   /* LowGPUUtilization: p95 below it */
	unsigned gpu_low_p5_percent;    /* ... or p95 above and p5 below this */
	unsigned cpu_high_percent;      /* CPUBottleneck: CPU above it ... */
	unsigned gpu_idle_percent;      /* ... while the GPU is below this */
	unsigned io_wait_percent;       /* IOBottleneck */
	unsigned gpu_memory_increase_percent; /* GPUMemoryIncrease */
	unsigned step_stddev;           /* StepOutlier: beyond this many sigma */
	unsigned memory_near_percent;   /* MemoryNearLimit */
	int64_t init_s, quiet_s;        /* SlowInitialization, NoLogOutput */
	unsigned min_samples;           /* the sample rules wait for this many */
	int64_t warmup_s;               /* not judged after each run's start */
};

/* The managed-training defaults (docs/config.md). */
void rules_defaults(struct rule_limits *l);

#define RULE_MESSAGE_MAX 256
/* At most this many samples (or step points) are kept as a finding's evidence. */
#define RULE_EVIDENCE_MAX 10

struct rule_finding {
	const char *rule; /* static: "LowGPUUtilization", ... */
	char message[RULE_MESSAGE_MAX];
	/* indices into samples (or steps, for StepOutlier) that show it */
	size_t evidence[RULE_EVIDENCE_MAX];
	size_t n_evidence;
	bool evidence_steps; /* evidence indexes steps, not samples */
};

/* Runs every rule; writes the ones that fire to out (at most max, in the
 * order of the rule list: rules_count/rules_name) and returns how many. */
size_t rules_evaluate(const struct rule_input *in, const struct rule_limits *l,
		      struct rule_finding *out, size_t max);
/* The rules, in order. */
size_t rules_count(void);
const char *rules_name(size_t i);
/* What rule i looks at, and what to do when it fires (static text; NULL
 * past the list). */
const char *rules_description(size_t i);
const char *rules_advice(size_t i);
/* Whether rule i needs a GPU job, and whether it skips the warm-up. */
bool rules_needs_gpu(size_t i);
bool rules_after_warmup(size_t i);
/* Whether a reading taken at at_ms falls in a warm-up of in's runs. */
bool rules_in_warmup(const struct rule_input *in, const struct rule_limits *l, int64_t at_ms);

/* Pure helper: the p-th percentile (0..100, nearest rank) of the n values;
 * sorts v in place. 0 when n is 0. */
double rules_percentile(double *v, size_t n, double p);

#endif
