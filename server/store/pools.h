/* pools.h - job sandbox rows ("pools", docs/jobs.md "Warm pools"): the
 * sandbox a job runs in, owned by one user, and kept warm after its job for
 * the job's keep_alive_s so that the next matching job skips Starting.
 *
 * States: starting (being built for job_id) -> in_use (ready, runs or is
 * about to run job_id) -> available (warm, idle until available_until) ->
 * in_use again (reused) or ended. A pool in state available has an open
 * ledger entry of source 'warm' (its GPUs stay held, and billed). */
#ifndef LABD_STORE_POOLS_H
#define LABD_STORE_POOLS_H

#include <stdbool.h>
#include <stdint.h>

#include "labd/boxshape.h"
#include "store/jobs.h"
#include "store/runtimes.h"

struct db;

enum pool_state { POOL_STARTING, POOL_AVAILABLE, POOL_IN_USE, POOL_ENDED };

struct pool {
	int64_t id, user_id;
	char user_name[33];
	enum pool_state state;
	bool gpu;
	char gpus[RUNTIME_GPUS_MAX]; /* the GPU ids it holds, "0,1" */
	int gpu_count;
	char image[JOB_IMAGE_MAX];
	int64_t memory_bytes, cpus_milli;
	bool network;
	bool ready; /* its agent said ready (pool_ready) */
	int64_t created_at, deadline, available_until, ended_at;
	int64_t job_id;      /* the job it runs (or is about to), 0 when none */
	int64_t last_job_id; /* the job it ran last */
	char end_reason[JOB_REASON_MAX];
	char gpu_kind[16]; /* the kind of its GPU devices (schema 20) */
};

/* What a job needs of a pool: a pool is reused only for the same. */
struct pool_shape {
	int64_t user_id;
	bool gpu;
	int gpu_count;
	/* the kind of GPU device (NULL: "whole"; a warm pool matches on it) and,
	 * for a new pool, the fraction of its card each device is (thousandths,
	 * 0: 1000), what its ledger entries charge */
	const char *gpu_kind;
	unsigned gpu_fraction_milli;
	/* the sandbox's size, as the backend and the supervisor speak of it; a warm
	 * pool matches on image, memory_bytes, cpus_milli and network (its GPU
	 * minors are the row's, not part of the match) */
	struct box_shape size;
};

const char *pools_state_name(enum pool_state s);

/* Inserts a starting pool for job_id holding gpus. 0 with *out, or -1. */
int pools_create(struct db *db, const struct pool_shape *shape, const char *gpus, int64_t job_id,
		 int64_t now, int64_t deadline, struct pool *out);
/* The pool with this id (1), none (0), or -1. */
int pools_find(struct db *db, int64_t id, struct pool *out);
/* The available pool of this shape whose deadline is after not_before and
 * whose keep-alive has not run out at now, the one warm the longest first:
 * 1 with *out, 0 none, -1. */
int pools_find_available(struct db *db, const struct pool_shape *shape, int64_t not_before,
			 int64_t now, struct pool *out);
/* The user's pools that are not ended; -1 on error. */
int pools_count_live(struct db *db, int64_t user_id);
/* Marks a starting or in_use pool ready. 1 changed, 0 not, -1. */
int pools_set_ready(struct db *db, int64_t id);
/* Takes an available pool for job_id (in_use): closes its warm ledger entry.
 * 1 taken, 0 no longer available, -1. */
int pools_take(struct db *db, int64_t id, int64_t job_id, int64_t now);
/* The job in an in_use pool is over: available until `until`; warm opens
 * the warm ledger entry (false: a pool not kept, about to be stopped). 1
 * changed, 0 not in use, -1. */
int pools_release(struct db *db, int64_t id, int64_t until, int64_t now, bool warm);
/* Ends a pool (any state but ended) with reason; closes a warm entry. 1
 * changed, 0 already ended, -1. */
int pools_end(struct db *db, int64_t id, const char *reason, int64_t now);
/* Calls fn for each pool that is not ended, oldest first (fn may use the
 * store). 0 or -1. */
int pools_each_live(struct db *db, int (*fn)(const struct pool *p, void *ctx), void *ctx);
/* Calls fn for each pool of user_id (0: everyone) that is available or
 * in_use, newest first. 0 or -1. */
int pools_each_warm(struct db *db, int64_t user_id, int (*fn)(const struct pool *p, void *ctx),
		    void *ctx);
/* Seconds the pool has been warm in total (its 'warm' ledger entries, an
 * open one up to now). */
int64_t pools_warm_s(struct db *db, int64_t id, int64_t now);

#endif
