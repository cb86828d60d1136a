/* moves.h - the moves of a runtime's row that the entry points (runtime.c),
 * the GPU queue (gpuqueue.c) and the reconciler (reconcile.c) share: end,
 * back to the queue, the backend's start, ready, the audit, the user's
 * limits, the queue's places. Every move that changes what a user sees
 * calls runtime_moved, the one place the runtime watch is told.
 *
 * It includes nothing else of runtime/ but poke.h (the reconciler's handle). */
#ifndef LABD_RUNTIME_MOVES_H
#define LABD_RUNTIME_MOVES_H

#include <stdbool.h>
#include <stdint.h>

#include "labd/boxshape.h"
#include "sched/quota_check.h"
#include "store/plans.h"
#include "store/runtimes.h"

struct app;

/* What the user's limits give one runtime (0 = the backend's default). */
struct runtime_resources {
	int64_t deadline_s; /* the plan's length or the quota left, the earlier */
	/* the sandbox's sizes (boxshape.h); its image and GPU minors are set when the
	 * backend is asked (runtime_ask_backend), from image below and the row */
	struct box_shape size;
	unsigned gpus; /* quota_gpus_per_runtime(): how many a GPU runtime gets */
	char image[PLAN_IMAGE_MAX + 1]; /* the plan's image (plans_user_image); "" = host root */
};

/* The row moved: the user's runtime watchers (event streams) are told and
 * the reconciler poked (the row's due times changed). The one hook every
 * move calls. */
void runtime_moved(struct app *app, int64_t user_id);
/* Adds an audit entry; a write that fails is logged as an error. */
void runtime_audit(struct app *app, int64_t now, const char *actor, const char *action,
		   const char *user, const char *address, const char *detail);
/* Ends a live row (stopped, or failed) with reason, once: audit, log,
 * watchers, and the proxy lets go; a GPU runtime pokes the reconciler (its
 * GPU or place in the queue is free). */
void runtime_end(struct app *app, const struct runtime *r, bool failed, const char *reason);
/* Moves r to running (ready), with the endpoint if it changed. */
void runtime_mark_ready(struct app *app, const struct runtime *r, const char *endpoint);
/* Hands r's sandbox, of the size res says, to the backend; a refusal fails
 * the row, a GPU still held puts it back in the queue. Never call with the
 * GPU allocation lock. */
void runtime_ask_backend(struct app *app, struct runtime *r, const struct runtime_resources *res);
/* The quota check of a start of kind now: the runtime's deadline and size
 * into *res. 0; -EDQUOT when a window is used up (*refusal, may be NULL);
 * -EPERM when the user's plan allows no GPUs; -EIO when unreadable. */
int runtime_check_quota(struct app *app, int64_t user_id, enum runtime_kind kind, int64_t now,
			struct runtime_resources *res, struct quota_window *refusal);
/* What the user's limits give a runtime of kind starting now (a GPU start
 * leaving the queue: the plan and quota of that moment, since an admin may
 * have changed them); a used-up window gives the shortest length. 0, or
 * -EIO when the limits cannot be read. */
int runtime_resources_read(struct app *app, int64_t user_id, enum runtime_kind kind, int64_t now,
			   struct runtime_resources *res);
/* Recomputes the queue's positions and estimates (no backend call; any thread). */
void runtime_queue_replan(struct app *app);

#endif
