/* job_storage.h - what each training job keeps on the state file system,
 * charged to its user (the job_storage table, docs/jobs.md "Retention"):
 * its spec's bytes (fixed at submit), its log's bytes and an estimate of
 * its metric points' bytes (measured while they may grow, final once
 * measured after the job's end), and which ended jobs the retention sweep
 * deletes. The row is made with its job (jobs_create) and goes with it
 * (ON DELETE CASCADE). */
#ifndef LABD_STORE_JOB_STORAGE_H
#define LABD_STORE_JOB_STORAGE_H

#include <stdbool.h>
#include <stdint.h>

struct db;

/* What a user's jobs keep, summed over them. */
struct job_storage_use {
	int64_t jobs; /* kept jobs, live and ended */
	int64_t spec_bytes, log_bytes, metric_bytes;
	int64_t total_bytes; /* the three together: what job_storage_bytes limits */
};

/* The sums of user_id's jobs as last measured. 0 or -1. */
int job_storage_of_user(struct db *db, int64_t user_id, struct job_storage_use *out);

/* A job whose stored bytes may still grow (not final). */
struct job_storage_open {
	int64_t job_id, user_id;
	int64_t ended_at; /* epoch s; 0 while live */
};
/* Calls fn for each job not measured final, of user_id (0: everyone's),
 * oldest first, at most max of them. The count passed, or -1. */
int job_storage_each_open(struct db *db, int64_t user_id, int max,
			  int (*fn)(const struct job_storage_open *o, void *ctx), void *ctx);
/* Pure. The bytes SQLite holds for `points` metric points whose names have
 * name_bytes bytes together (the row and its index entry, measured at about
 * 48 bytes a point plus each name twice with the pages' slack). */
int64_t job_storage_metric_estimate(int64_t points, int64_t name_bytes);
/* The estimated bytes of job_id's metric points now; -1 on error. */
int64_t job_storage_metric_bytes(struct db *db, int64_t job_id);
/* Stores a measurement; final: the job ended long enough ago that nothing
 * more is written for it. 0 or -1. */
int job_storage_set(struct db *db, int64_t job_id, int64_t log_bytes, int64_t metric_bytes,
		    bool final);

/* Calls fn for the ended jobs retention deletes, at most max: each ended
 * before ended_before (0: none by age; oldest first), then each beyond the
 * newest keep_per_user ended jobs of its user (-1: no such cap), looking
 * only at users with a job ended at or after ended_since (0: every user).
 * Each read is a range of an index, never a sort of every user's jobs. The
 * count passed, or -1. */
int job_storage_each_expired(struct db *db, int64_t ended_before, int64_t keep_per_user,
			     int64_t ended_since, int max, int (*fn)(int64_t job_id, void *ctx),
			     void *ctx);

/* Deletes job_id when it has ended, with everything of it in the store
 * (transitions, metric points, samples, findings, its storage row: ON
 * DELETE CASCADE); the ledger keeps its billed entries. 1 deleted, 0 no such
 * job, JOB_STORAGE_LIVE when it has not ended, or -1. */
#define JOB_STORAGE_LIVE (-2)
int job_storage_delete_job(struct db *db, int64_t job_id);
/* Whether a job row exists: 1, 0, or -1. */
int job_storage_job_exists(struct db *db, int64_t job_id);

#endif
