/* submit.h - the POST /api/v1/jobs body checked and normalised (pure: no
 * store, no backend; docs/jobs.md "Submit").
 *
 * Every field is checked against the rules of docs/jobs.md and the user's
 * limits; the first bad one is named (field path like "environment.FOO" or
 * "metric_definitions[2].regex") with a message, and nothing is made. What
 * passes is the normalised request, every default filled in, kept as the
 * job's spec and shown back by the API. Metric regexes are compiled with
 * PCRE2 (the dialect Python users bring) so a bad one is refused here. */
#ifndef LABD_JOBS_SUBMIT_H
#define LABD_JOBS_SUBMIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* Bounds of the request (docs/jobs.md). */
#define JOBS_ARGV_MAX 64
#define JOBS_ARG_MAX_BYTES 4096
#define JOBS_ENV_MAX 64
#define JOBS_ENV_VALUE_MAX_BYTES 4096
#define JOBS_HYPERPARAMETERS_MAX_BYTES (16 * 1024)
#define JOBS_CHANNELS_MAX 8
#define JOBS_PATH_MAX_BYTES 1024
#define JOBS_METRICS_MAX 40
#define JOBS_REGEX_MAX_CHARS 500
#define JOBS_RETRIES_MAX 30
#define JOBS_MAX_RUNTIME_DEFAULT_S 86400 /* without a plan's job_max_runtime_s */
#define JOBS_MAX_WAIT_MAX_S (30 * 86400LL)
#define JOBS_MEMORY_MIN_BYTES (64LL << 20)
#define JOBS_CPUS_MIN_MILLI 10

/* What the user's plan and [jobs] allow; 0 for a size = no cap (the
 * backend's default is then used when the request names none). */
struct jobs_limits {
	unsigned gpus_max;            /* the plan's gpus_per_runtime */
	int64_t max_runtime_s;        /* the plan's job_max_runtime_s (default and cap) */
	int64_t memory_bytes;         /* the plan's memory: default and cap */
	int64_t cpus_milli;           /* the plan's cpus: default and cap */
	const char *image;            /* the plan's image, "" = the host's root */
	const char *gpu_kind;         /* the plan's kind of GPU device; NULL = "whole" */
	int64_t keep_alive_max_s;     /* [jobs] keep_alive_max */
	int64_t max_wait_default_s;   /* [jobs] max_wait_default */
	int64_t instances_max;        /* [slurm] max_instances on Slurm; 0 or 1 = one host */
	bool instances_no_addresses;  /* on Slurm, but [slurm] job_addresses is not set */
	/* whether an image name is one of [images]; NULL = only the plan's */
	bool (*image_ok)(const char *name, void *ctx);
	void *image_ctx;
};

/* The normalised request. */
struct jobs_submit {
	json_t *spec; /* owned: release with jobs_submit_release */
	const char *name, *image; /* borrowed from spec */
	const char *gpu_kind;     /* a GPU job's kind of device (borrowed); NULL for cpu */
	bool gpu;
	int gpu_count, max_retries;
	int64_t memory_bytes, cpus_milli;
	int64_t max_runtime_s, max_wait_s, keep_alive_s;
	int64_t instance_count; /* hosts that run it together, 1 = one sandbox */
	bool preemptible; /* capacity "preemptible" */
};

struct jobs_submit_error {
	char field[96];
	char message[256];
};

/* The fields a request may have (NULL-terminated). */
extern const char *const jobs_submit_fields[];

/* Checks body against lim. 0 with *out, or -1 with *err naming the field.
 * What passes also passes the supervisor's own reader (proto/jobspec.h) once
 * made into the job spec, with the largest grace, log cap and CPU count
 * dispatch may add: nothing accepted here is refused when the job runs (a
 * spec over 48 KiB is named by its largest field). */
int jobs_submit_check(json_t *body, const struct jobs_limits *lim, struct jobs_submit *out,
		      struct jobs_submit_error *err);
void jobs_submit_release(struct jobs_submit *s);
/* The job spec the supervisor runs (docs/jobs.md "The job spec") made from a
 * normalised request (jobs_submit's spec) and the numbers dispatch sets; NULL
 * when out of memory. */
json_t *jobs_spec_json(const char *name, json_t *request, int64_t max_runtime_s, int64_t grace_s,
		       int64_t log_max_bytes, int gpus, int64_t cpus);

/* Whether a name is a job name: ^[a-z0-9][a-z0-9-]{0,62}$. */
bool jobs_name_ok(const char *name);
/* Whether path is home-relative: no leading '/', no ".." component, no NUL
 * (len is the JSON length), at most JOBS_PATH_MAX_BYTES. */
bool jobs_path_ok(const char *path, size_t len);
/* Compiles a metric regex with PCRE2: 0, or -1 with PCRE2's message in why. */
int jobs_regex_check(const char *regex, char *why, size_t len);

#endif
