/* gpu_queue.h - the GPU queue's rows (schema 9): a GPU start that found no
 * GPU free is a runtime row in state queued plus an entry here (when it was
 * queued, when it expires, and the position and estimated start last
 * computed by the fair order, sched/queue.h). Both are in SQLite, so the
 * queue survives any restart. An entry goes with its row's state: every
 * move out of queued (runtimes_set_state, gpu_queue_take) deletes it in the
 * same transaction, and a deleted user's rows take theirs along (cascade). */
#ifndef LABD_GPU_QUEUE_H
#define LABD_GPU_QUEUE_H

#include <stdint.h>

#include "store/runtimes.h"

struct db;

struct gpu_queue_entry {
	int64_t runtime_id, user_id;
	char user_name[33];
	int64_t queued_at, expires_at;
	int64_t length_s; /* the runtime's planned length: its deadline - created_at */
	int position;     /* as last computed; 0 before the first */
	int64_t estimate_at;
	char gpu_kind[16]; /* the kind of device it waits for (schema 20) */
};

/* Inserts a queued GPU runtime for user_id waiting for a device of gpu_kind
 * (a plan's gpu, schema 20; length_s: how long it will run once started; it
 * expires at expires_at) and its entry, in one transaction. 0 and *out (the
 * row), DB_CONFLICT when the user has a live runtime, -EIO. */
int gpu_queue_add(struct db *db, int64_t user_id, const char *token, const char *gpu_kind,
		  int64_t now, int64_t length_s, int64_t expires_at, struct runtime *out);
/* Calls fn for each entry in arrival order (queued_at, then runtime id)
 * until it returns non-zero. The number passed, or -EIO. */
int gpu_queue_each(struct db *db, int (*fn)(const struct gpu_queue_entry *e, void *ctx),
		   void *ctx);
/* Records an entry's position and estimate (0: none). 1 when they changed,
 * 0 when not (or no such entry), -EIO. */
int gpu_queue_set_place(struct db *db, int64_t runtime_id, int position, int64_t estimate_at);
/* The queued runtime starts: state starting on gpus (each fraction_milli of
 * its card, what its ledger entry charges), created_at now, the new deadline,
 * its entry deleted. 1 done, 0 when it is no longer queued, -EIO. */
int gpu_queue_take(struct db *db, int64_t runtime_id, const char *gpus, unsigned fraction_milli,
		   int64_t now, int64_t deadline);
/* Undoes gpu_queue_take for a start the backend refused because the GPU is
 * still held (a teardown not finished): queued again with its old entry
 * times, GPUs cleared. 1 done, 0 when it is no longer starting, -EIO. */
int gpu_queue_put_back(struct db *db, int64_t runtime_id, int64_t queued_at, int64_t expires_at);

#endif
