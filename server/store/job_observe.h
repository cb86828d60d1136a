/* job_observe.h - what is observed of a training job (migrations 13, 14): its
 * metric points, its last samples, the profiling rules' findings, and how
 * far its log was read (docs/jobs.md "Logs", "Metrics", "Profiling rules").
 * Every function takes db_lock itself. */
#ifndef LABD_STORE_JOB_OBSERVE_H
#define LABD_STORE_JOB_OBSERVE_H

#include <stddef.h>
#include <stdint.h>

struct db;

/* ---- metric points ---- */

/* Adds a point (the caller keeps the per-metric cap with job_metrics_count).
 * 0 or -1. */
int job_metrics_add(struct db *db, int64_t job_id, const char *name, int64_t at_ms, double value);
/* The points the job has of metric name; -1 on error. */
int64_t job_metrics_count(struct db *db, int64_t job_id, const char *name);
typedef int (*job_point_fn)(void *ctx, const char *name, int64_t at_ms, double value);
/* Every point of the job, by name then time. The count or -1. */
int job_metrics_each(struct db *db, int64_t job_id, job_point_fn fn, void *ctx);
/* The last point of each of the job's metrics, by name. The count or -1. */
int job_metrics_last(struct db *db, int64_t job_id, job_point_fn fn, void *ctx);
/* The newest (at most max) points of one metric, oldest first, into at_ms
 * and value. The count or -1. */
int job_metrics_series(struct db *db, int64_t job_id, const char *name, int64_t *at_ms,
		       double *value, size_t max);

/* ---- samples ---- */

/* A kept sample; a percent of -1, or bytes of -1, are unknown. */
struct job_sample_row {
	int64_t at_ms, cpu_usage_us, io_wait_us;
	double cpu_percent, io_wait_percent; /* since the job's sample before */
	int64_t memory_bytes, memory_limit_bytes;
	double gpu_percent;
	int64_t gpu_memory_bytes;
	int64_t log_bytes;
};

/* Adds a sample and drops the job's oldest beyond keep. 0 or -1. */
int job_samples_add(struct db *db, int64_t job_id, const struct job_sample_row *s, int64_t keep);
/* The job's latest sample: 1 with *out, 0 none, -1. */
int job_samples_latest(struct db *db, int64_t job_id, struct job_sample_row *out);
/* The job's kept samples, oldest first, at most max into out. The count or -1. */
int job_samples_list(struct db *db, int64_t job_id, struct job_sample_row *out, size_t max);

/* ---- findings ---- */

/* Records that rule fires now: a new finding, or the same one's last time,
 * message and evidence (samples_json, a JSON array) updated; its first time
 * is kept. 0 or -1. */
int job_findings_put(struct db *db, int64_t job_id, const char *rule, int64_t at_ms,
		     const char *message, const char *samples_json);
typedef int (*job_finding_fn)(void *ctx, const char *rule, int64_t first_at_ms,
			      int64_t last_at_ms, const char *message, const char *samples_json);
/* The job's findings, in the order they were first found. The count or -1. */
int job_findings_each(struct db *db, int64_t job_id, job_finding_fn fn, void *ctx);

/* ---- the reader's place ---- */

struct job_observe_row {
	int64_t log_offset;        /* bytes of the log read for metrics */
	int64_t started_at_ms;     /* observation began (the job started) */
	int64_t first_output_at_ms, last_output_at_ms; /* 0 = none yet */
	uint64_t dropped_defs;     /* bit i: metric_definitions[i] dropped (migration 14) */
};
/* 1 with *out, 0 none yet (*out zeroed), -1. */
int job_observe_get(struct db *db, int64_t job_id, struct job_observe_row *out);
/* Creates or replaces the job's row. 0 or -1. */
int job_observe_put(struct db *db, int64_t job_id, const struct job_observe_row *r);

#endif
