/* queue.h - the fair order of the GPU queue and its estimates.
 *
 * The rule (docs/api.md, "GPUs and the queue"): whoever used less GPU time in
 * the last 24 hours goes first; among equals, whoever queued first; then the
 * lower runtime id. Each user has at most one entry (one runtime per user).
 * The queue is kept per kind of device (a plan's gpu: "whole", "share", a MIG
 * profile, docs/gpu.md): an entry waits only behind entries of its own kind,
 * for devices of its kind, and its place and estimate count only those. GPU
 * time is weighed as the ledger charges it (times each device's fraction).
 * Usage is read from the ledger when the order is computed, so the order
 * follows the rolling window as it moves.
 *
 * The estimate of each entry simulates the pool: every GPU frees at its
 * holder's deadline (now if free), the entries take GPUs in order as they
 * free (a job of N GPUs once its N earliest are free), and each then holds
 * its GPUs for its own planned length. It is an
 * upper bound when holders stop early, which they usually do. */
#ifndef LABD_SCHED_QUEUE_H
#define LABD_SCHED_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct db;
struct labd_config;

#define QUEUE_KIND_MAX 16 /* store/plans.h PLAN_GPU_MAX */

struct queue_item {
	int64_t runtime_id, user_id;
	int64_t job_id; /* > 0: a training job waiting for its GPUs (runtime_id 0) */
	unsigned gpus;  /* how many it takes: 1 for a runtime, the job's gpu_count */
	int64_t queued_at, expires_at;
	int64_t length_s;  /* how long it will hold its GPU once started */
	int64_t gpu_s_24h; /* its user's GPU seconds in [now - 24 h, now) */
	char kind[QUEUE_KIND_MAX]; /* the kind of device it waits for; "" = "whole" */
	/* set by queue_estimate */
	int position;        /* 1 = next */
	int64_t estimate_at; /* 0 when the pool has fewer GPUs than it takes */
};

/* Sorts items into the fair order. Pure. */
void queue_order(struct queue_item *items, size_t n);
/* Numbers the items of kind (NULL: all of them) among items (already in
 * order) 1, 2, ... and estimates each one's start, given when each of the
 * n_gpus devices of that kind frees (free_at[i] >= now; a free one: now).
 * Items of other kinds are left as they are. Pure. */
void queue_estimate(struct queue_item *items, size_t n, const char *kind, const int64_t *free_at,
		    size_t n_gpus, int64_t now);
/* Whether item waits for devices of kind ("" and NULL read as "whole"). Pure. */
bool queue_is_kind(const struct queue_item *item, const char *kind);
/* Reads the queue (at most max entries) with each user's GPU seconds of the
 * last 24 hours as of now, in arrival order: queued GPU runtimes and GPU
 * training jobs waiting for their pool (store/jobs.h), so both wait in one
 * fair order (docs/jobs.md "GPUs"). The count, or -EIO. */
int queue_load(struct db *db, int64_t now, struct queue_item *items, size_t max);
/* Entries a job's turn reads at most: every user's first turns come first
 * (store/jobs.h), so up to this many users wait in one fair order. */
#define QUEUE_TURN_MAX 256

/* Whether id is one of ids[0..n) (a list of excused users). Pure. */
bool queue_listed(const int64_t *ids, size_t n, int64_t id);

/* Whether the job job_id may take its GPUs now with n_free devices of its
 * kind free: every entry of that kind ahead of it in the fair order (items
 * already ordered) could start too (entries of other kinds wait apart).
 * Jobs of the excused users (held back by caps of their own) take no GPU now
 * and count for nothing ahead. */
int queue_job_turn(const struct queue_item *items, size_t n, int64_t job_id, unsigned n_free,
		   const int64_t *excused, size_t n_excused);
/* The same rule for the queued runtime runtime_id (one GPU): a runtime
 * start never overtakes a GPU job ahead of it in the fair order. */
int queue_runtime_turn(const struct queue_item *items, size_t n, int64_t runtime_id,
		       unsigned n_free, const int64_t *excused, size_t n_excused);
/* The users of the job entries among items[0..n) that caps of their own
 * hold back now, as the jobs pass excuses them (jobs/dispatch.c): their
 * pools at [jobs] max_pools_per_user, or the GPUs of their runtime and
 * running pools beside the job's beyond [quota] gpus_held (a warm pool is
 * reused or released by the job's own dispatch). Into excused (at most
 * max): the count, or -EIO. */
int queue_excused(struct db *db, const struct labd_config *cfg, const struct queue_item *items,
		  size_t n, int64_t *excused, size_t max);

#endif
