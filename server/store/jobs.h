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
#include <stddef.h>
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
#define JOB_WAITING_MAX 200 /* what a preemption was for, in words */

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
	/* the sandbox it runs in, its stop and its time */
	int64_t memory_bytes, cpus_milli; /* the sandbox's size (pool matching) */
	bool network;                     /* egress */
	bool run_sent;                    /* job_run was taken by the backend this attempt */
	int64_t grace_s;                  /* stop grace: SIGTERM, then SIGKILL */
	int64_t training_ms;              /* time in Training, summed over attempts */
	/* the warm pool it left behind (docs/jobs.md "Warm pools"): status ""
	 * (none), "Available", "Reused" or "Terminated"; warm_from/warm_to epoch
	 * s of its Available period (warm_to 0 while available) */
	char warm_status[12];
	int64_t warm_from, warm_to, warm_until;
	char warm_reason[JOB_REASON_MAX];
	int64_t reused_by; /* the job that reused its warm pool, 0 = none */
	/* preemptible capacity (docs/jobs.md "Preemptible capacity"): while
	 * labd stops the job for someone who waits, preempting says who ("" =
	 * not being preempted) and preempt_at_ms since when; preemptions counts
	 * the times it was put back in the queue */
	bool preemptible;
	char preempting[JOB_WAITING_MAX];
	int64_t preempt_at_ms;
	int preemptions;
	/* the kind of GPU device it runs on (schema 20; store/plans.h) */
	char gpu_kind[16];
};

/* What a new job is made of (jobs_create). */
struct job_new {
	int64_t user_id;
	const char *name;
	const char *spec; /* normalised JSON text */
	bool gpu;
	int gpu_count;
	const char *gpu_kind; /* a GPU job's kind of device; NULL = "whole" */
	const char *image;
	int64_t memory_bytes, cpus_milli;
	bool network;
	bool preemptible; /* capacity "preemptible" */
	int max_retries;
	int64_t max_runtime_s, max_wait_s, keep_alive_s, grace_s;
	int64_t now_ms;
	/* refuse when the user has this many live jobs already; -1 = no limit */
	int64_t max_live;
	/* refuse when the user's jobs keep this many bytes or more
	 * (job_storage.h), or would with this spec; 0 = no limit (a limit
	 * is at least 1 MiB) */
	int64_t max_stored_bytes;
};

#define JOBS_CREATE_QUOTA (-3)   /* max_live reached */
#define JOBS_CREATE_STORAGE (-4) /* max_stored_bytes reached */

/* Inserts a Pending job, its first transition and its storage row
 * (job_storage.h). 0 with *out (release with jobs_row_free), DB_CONFLICT
 * when the user has a job of that name, JOBS_CREATE_QUOTA,
 * JOBS_CREATE_STORAGE, or -1. */
int jobs_create(struct db *db, const struct job_new *n, struct job *out);
/* How many live jobs user_id has; -1 on error. */
int jobs_count_live(struct db *db, int64_t user_id);

/* A move of a job's secondary status (jobs_move). Fields left at their zero
 * value change nothing, except where said. */
struct job_move {
	enum job_secondary secondary;
	enum job_status status;
	const char *message;     /* the transition's message, "" allowed */
	int64_t at_ms;           /* wall clock of the change */
	int64_t pool_id;         /* > 0: the job runs in this pool now */
	bool reused_pool;        /* with pool_id: it is a warm pool */
	bool next_attempt;       /* a retry: attempt + 1, run_sent cleared */
	bool clear_pool;         /* pool_id := 0 (a retry builds a new pool) */
	bool set_exit;           /* exit_code := exit_code (-1: none) */
	int exit_code;
	const char *failure;     /* non-NULL: failure_reason := failure */
	/* back in the queue after a preemption: run_sent cleared, preempting
	 * cleared, preemptions + 1, the interruption's requeued_at set (with
	 * secondary Pending and clear_pool; no attempt is used) */
	bool preempted;
	/* only move when the job's secondary is one of these (bit 1 << secondary);
	 * 0 = whenever the job is live */
	unsigned from_mask;
};

/* Moves a live job: closes its open transition at at_ms and opens one of the
 * new secondary status; opens its ledger entry (source 'job') when it enters
 * Starting..Uploading without one and closes it when it leaves them (a retry
 * closes the attempt's entry and opens the next); adds the Training time.
 * 1 moved, 0 not live or not in from_mask, -1. */
int jobs_move(struct db *db, int64_t id, const struct job_move *m);
/* Sets the pool (0: none) of a job in Starting without a transition (a
 * retry's new pool; a pool start the backend refused for now: the job waits
 * for the next pass). 1 set, 0 not in Starting any more, -1. */
int jobs_set_pool(struct db *db, int64_t id, int64_t pool_id);
/* A GPU job waiting for its pool: Pending, or Starting again without a pool
 * (a retry). */
struct job_waiting_gpu {
	int64_t job_id, user_id, created_at, expires_at, length_s;
	int gpu_count;
	char gpu_kind[16];
};
/* Calls fn for each waiting GPU job, oldest first. 0 or -1. */
int jobs_each_waiting_gpu(struct db *db, int (*fn)(const struct job_waiting_gpu *w, void *ctx),
			  void *ctx);
/* Sets the message of a waiting job's open transition (why it still waits). 1 when
 * it changed, 0 when it said so already or the job is not in Pending, -1. */
int jobs_set_wait_message(struct db *db, int64_t id, const char *message);
/* Records that job_run was taken for the current attempt. 0 or -1. */
int jobs_set_run_sent(struct db *db, int64_t id, bool sent);
/* A stop asked for: the grace to use. 0 or -1. */
int jobs_set_grace(struct db *db, int64_t id, int64_t grace_s);
/* The warm pool the job left: status as struct job's; from/to/until 0 keep
 * the stored value; reason NULL keeps it; reused_by 0 keeps it. 0 or -1. */
int jobs_set_warm(struct db *db, int64_t id, const char *status, int64_t from, int64_t to,
		  int64_t until, const char *reason, int64_t reused_by);

/* A job's transition (one per secondary status it went through). */
struct job_transition {
	enum job_secondary secondary;
	int64_t start_at_ms, end_at_ms; /* end 0 while current */
	char message[JOB_REASON_MAX];
};
/* Calls fn for each transition of job id in order. The count or -1. */
int jobs_each_transition(struct db *db, int64_t id,
			 int (*fn)(const struct job_transition *t, void *ctx), void *ctx);
/* Billable seconds of the job's ledger entries (open ones up to now). */
int64_t jobs_billable_s(struct db *db, int64_t id, int64_t now);
/* The same seconds each multiplied by its entry's rate (a preemptible
 * entry bills its plan's preemptible_rate), rounded to the second. */
int64_t jobs_charged_s(struct db *db, int64_t id, int64_t now);

/* A preemption begins: a live preemptible job that is not being preempted
 * gets preempting := waiting and preempt_at_ms := at_ms, and an
 * interruption row (reason "Preempted"), in one transaction. 1 begun, 0
 * not such a job (any more), -1. */
int jobs_preempt_begin(struct db *db, int64_t id, const char *waiting, int64_t at_ms);
/* One interruption of a job (job_interruptions). */
struct job_interruption {
	char reason[16];                 /* "Preempted" */
	char waiting[JOB_WAITING_MAX];   /* what waited for its capacity */
	int64_t at_ms;                   /* its stop began */
	int64_t requeued_at_ms;          /* back in the queue; 0 while stopping */
	int64_t resumed_at_ms;           /* on a pool again; 0 while waiting */
};
/* A live preemptible job on a pool (a victim labd may preempt). */
struct job_on_pool {
	int64_t id, user_id, pool_id, grace_s, preempt_at_ms;
	char user_name[33];
	int gpu_count;           /* 0 for a cpu job */
	bool run_sent, preempting;
	char gpu_kind[16];       /* the kind of its GPU devices (schema 20) */
};
/* Calls fn for each InProgress preemptible job that has a pool, newest
 * first (the one that lost least work first). The count or -1. */
int jobs_each_preemptible(struct db *db, int (*fn)(const struct job_on_pool *v, void *ctx),
			  void *ctx);
/* The GPUs user_id's preemptible jobs hold on their pools; -1. */
int jobs_preemptible_gpus_of(struct db *db, int64_t user_id);
/* How many on-demand jobs wait (Pending, or Starting without a pool); -1. */
int jobs_count_waiting_on_demand(struct db *db);
/* Calls fn for each interruption of job id in order. The count or -1. */
int jobs_each_interruption(struct db *db, int64_t id,
			   int (*fn)(const struct job_interruption *x, void *ctx), void *ctx);

/* A listing's filter: user_id 0 = everyone; status and name NULL = any. */
struct job_filter {
	int64_t user_id;
	const char *status; /* a status or secondary status name */
	const char *name;   /* exact name */
	int64_t limit, offset;
};
/* Calls fn for each matching job, newest first, and sets *total to the
 * number of all matches. The count passed, or -1. fn gets a summary row: its
 * spec is NULL (never read: a listing must stay cheap under the store's lock;
 * jobs_find_for has it). */
int jobs_list(struct db *db, const struct job_filter *f,
	      int (*fn)(const struct job *j, void *ctx), void *ctx, int64_t *total);
/* The job of user_id with this id (1), none (0), -1; user_id 0 = any user. */
int jobs_find_for(struct db *db, int64_t user_id, int64_t id, struct job *out);
int jobs_status_parse(const char *name, enum job_status *out);
int jobs_secondary_parse(const char *name, enum job_secondary *out);

const char *jobs_status_name(enum job_status s);       /* "InProgress", ... */
const char *jobs_secondary_name(enum job_secondary s); /* "Pending", ... */
/* True while status is InProgress or Stopping. */
bool jobs_live(const struct job *j);

/* The job with this id (1), none (0) or -1. *out's spec must be released
 * with jobs_row_free. */
int jobs_find(struct db *db, int64_t id, struct job *out);
void jobs_row_free(struct job *j);
/* Calls fn for each live job (InProgress or Stopping): those not waiting for
 * a pool oldest first, then the waiting ones in per-user turns (each user's
 * oldest, then each user's second oldest, ...). The row (spec included) is
 * borrowed for the call; fn may use the store; fn returning > 0 stops. */
int jobs_each_live(struct db *db, int (*fn)(const struct job *j, void *ctx), void *ctx);
/* The ids of Pending jobs past their max_wait_s at now, oldest first, at most
 * max: the count, or -1. */
int jobs_overdue_pending(struct db *db, int64_t now, int64_t *ids, size_t max);

#endif
