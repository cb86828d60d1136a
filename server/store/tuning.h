/* tuning.h - tuning jobs (automatic model tuning), their trials and the
 * values trials reached at the early-stopping rungs (migration 17;
 * docs/jobs.md "Tuning jobs").
 *
 * A tuning job is InProgress | Completed | Failed | Stopping | Stopped; it
 * keeps its normalised request as JSON text. A trial is one training job of
 * it, made in index order: Pending (its row is made, its job not yet taken),
 * InProgress, then Completed | Failed | Stopped | EarlyStopped. A trial's
 * ended_at (epoch s) is 0 until its job is over; an EarlyStopped trial may
 * still run until its stop lands. Every function takes db_lock itself. */
#ifndef LABD_STORE_TUNING_H
#define LABD_STORE_TUNING_H

#include <stdbool.h>
#include <stdint.h>

struct db;

#define TUNING_NAME_MAX 58 /* a trial's job name adds "-NNN" (JOB_NAME_MAX 63) */
#define TUNING_REASON_MAX 512
#define TUNING_METRIC_MAX 255

enum tuning_status {
	TUNING_IN_PROGRESS,
	TUNING_COMPLETED,
	TUNING_FAILED,
	TUNING_STOPPING,
	TUNING_STOPPED
};
enum trial_status {
	TRIAL_PENDING,
	TRIAL_IN_PROGRESS,
	TRIAL_COMPLETED,
	TRIAL_FAILED,
	TRIAL_STOPPED,
	TRIAL_EARLY_STOPPED
};

struct tuning_job {
	int64_t id, user_id;
	char user_name[33];
	char name[TUNING_NAME_MAX + 1];
	char *spec; /* the normalised request, malloc'd: tuning_row_free */
	enum tuning_status status;
	char reason[TUNING_REASON_MAX];
	int64_t created_at, ended_at; /* epoch s; ended_at 0 while live */
};

struct tuning_trial {
	int64_t tuning_id;
	int index;   /* 1-based, in the order trials were made */
	int64_t job_id; /* 0 while Pending */
	char job_name[64];
	char parameters[4096]; /* JSON object: each range's value */
	enum trial_status status;
	bool has_objective;
	double objective;
	char reason[TUNING_REASON_MAX];
	int rung; /* early-stopping rungs passed */
	int64_t created_at_ms, started_at, ended_at; /* ended_at 0 while its job runs */
};

/* Inserts an InProgress tuning job. 0 with *id, DB_CONFLICT when the user
 * has one of that name, -1. */
int tuning_create(struct db *db, int64_t user_id, const char *name, const char *spec,
		  int64_t now, int64_t *id);
/* The tuning job id of user_id (0: any user): 1 with *out, 0 none, -1.
 * Release *out with tuning_row_free. */
int tuning_find_for(struct db *db, int64_t user_id, int64_t id, struct tuning_job *out);
void tuning_row_free(struct tuning_job *t);
/* Calls fn for each tuning job of user_id (0: everyone), newest first, at
 * most limit from offset; *total is every match. The row is borrowed for
 * the call. The count passed, or -1. */
int tuning_list(struct db *db, int64_t user_id, int64_t limit, int64_t offset,
		int (*fn)(const struct tuning_job *t, void *ctx), void *ctx, int64_t *total);
/* Calls fn for each InProgress or Stopping tuning job, oldest first (the
 * row borrowed; fn may use the store). The count or -1. */
int tuning_each_live(struct db *db, int (*fn)(const struct tuning_job *t, void *ctx), void *ctx);
/* Moves a tuning job to status (with reason, "" keeps it) when it is in
 * from_mask (bit 1 << status); an ended status sets ended_at := now.
 * 1 moved, 0 not in from_mask, -1. */
int tuning_move(struct db *db, int64_t id, enum tuning_status status, const char *reason,
		unsigned from_mask, int64_t now);

/* Inserts trial t (Pending, no job yet). 0, DB_CONFLICT when that index
 * exists, -1. */
int tuning_trial_add(struct db *db, const struct tuning_trial *t);
/* Calls fn for each trial of a tuning job in index order. The count or -1. */
int tuning_trials_each(struct db *db, int64_t tuning_id,
		       int (*fn)(const struct tuning_trial *t, void *ctx), void *ctx);
/* Writes a trial's job_id, status, objective, reason, rung and times. 0 or -1. */
int tuning_trial_put(struct db *db, const struct tuning_trial *t);

/* Records the value a trial reached at a rung. 0 or -1. */
int tuning_rung_put(struct db *db, int64_t tuning_id, int rung, int index, double value);
/* The values every trial of the tuning job reached at rung, into values
 * (at most max). The count or -1. */
int tuning_rung_values(struct db *db, int64_t tuning_id, int rung, double *values, int max);

/* The number of points of a job's metric, or -1. */
int64_t tuning_metric_count(struct db *db, int64_t job_id, const char *metric);
/* The value of the job's n-th point (0-based, in time order) of metric, or
 * the last one with n < 0. 1 with *value, 0 none, -1. */
int tuning_metric_point(struct db *db, int64_t job_id, const char *metric, int64_t n,
			double *value);

const char *tuning_status_name(enum tuning_status s); /* "InProgress", ... */
const char *tuning_trial_status_name(enum trial_status s);
/* True while a tuning job is InProgress or Stopping. */
bool tuning_live(const struct tuning_job *t);

#endif
