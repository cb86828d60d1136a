/* jobs.h - training job rows, their status transitions and the job
 * sandboxes ("pools") they run in (docs/jobs.md).
 *
 * A job's status is InProgress | Completed | Failed | Stopping | Stopped;
 * its secondary status walks Pending -> Starting -> Downloading -> Training
 * -> Uploading -> Completed | Failed | Stopped | MaxRuntimeExceeded |
 * MaxWaitTimeExceeded | Interrupted. Every change of the secondary status is
 * a transition row (start, end, message), all kept. */
#ifndef LABD_STORE_JOBS_H
#define LABD_STORE_JOBS_H

#include <stdbool.h>
#include <stdint.h>

struct db;

enum job_status { JOB_IN_PROGRESS, JOB_COMPLETED, JOB_FAILED, JOB_STOPPING, JOB_STOPPED };
enum job_secondary {
	JOB_PENDING,
	JOB_STARTING,
	JOB_DOWNLOADING,
	JOB_TRAINING,
	JOB_UPLOADING,
	JOB_S_COMPLETED,
	JOB_S_FAILED,
	JOB_S_STOPPING,
	JOB_S_STOPPED,
	JOB_MAX_RUNTIME_EXCEEDED,
	JOB_MAX_WAIT_EXCEEDED,
	JOB_INTERRUPTED,
};

#define JOB_NAME_MAX 63
#define JOB_REASON_MAX 512
#define JOB_IMAGE_MAX 80

struct job {
	int64_t id, user_id;
	char user_name[33];
	char name[JOB_NAME_MAX + 1];
	enum job_status status;
	enum job_secondary secondary;
	/* the submitted request as normalised JSON text (docs/jobs.md "Submit"),
	 * malloc'd; jobs_row_free() releases it */
	char *spec;
	bool gpu;             /* type gpu */
	int gpu_count;
	char image[JOB_IMAGE_MAX];
	int64_t pool_id;      /* the pool it runs (ran) in, 0 before one is chosen */
	bool reused_pool;     /* it started on a warm pool (skipped Starting) */
	int attempt, max_retries;
	int64_t max_runtime_s, max_wait_s, keep_alive_s;
	int64_t created_at, started_at, ended_at; /* epoch s; 0 = not yet */
	int64_t billable_s;   /* Starting .. Uploading so far */
	int exit_code;        /* -1 when none */
	char failure_reason[JOB_REASON_MAX];
};

const char *jobs_status_name(enum job_status s);       /* "InProgress", ... */
const char *jobs_secondary_name(enum job_secondary s); /* "Pending", ... */
/* True while status is InProgress or Stopping. */
bool jobs_live(const struct job *j);

/* The job with this id (1), none (0) or -1. *out's spec must be released
 * with jobs_row_free. */
int jobs_find(struct db *db, int64_t id, struct job *out);
void jobs_row_free(struct job *j);
/* Calls fn for each live job (InProgress or Stopping), oldest first. */
int jobs_each_live(struct db *db, int (*fn)(const struct job *j, void *ctx), void *ctx);

#endif
