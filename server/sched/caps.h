/* caps.h - the two capacity caps as the web process counts them from the store:
 * live sandboxes on the host (runtimes and job pools, warm included; a runtime
 * queued for a GPU has no sandbox yet) against capacity_max_sandboxes(), and the
 * GPUs one user holds at once (runtime, pools, warm pools) against [quota]
 * gpus_held. Counting only; runtime.c and dispatch.c decide what a refusal does.
 *
 * Folder rule (sched/, layer 5): includes common/, config/, metrics/, store/. */
#ifndef LABD_CAPS_H
#define LABD_CAPS_H

#include <stdbool.h>
#include <stdint.h>

struct db;
struct labd_config;

/* What one user holds now. */
struct caps_held {
	int runtime_gpus; /* of their live runtime (1 while it is queued for one) */
	int pool_gpus;    /* of their pools that run a job or start one */
	int warm_gpus;    /* of their warm pools (kept for a next job) */
	/* of pool_gpus, those of their preemptible jobs: labd frees them for whoever
	 * asks (docs/jobs.md "Preemptible capacity") */
	int preemptible_gpus;
};

/* Live sandboxes on the host: >= 0, or -EIO. */
int caps_live_sandboxes(struct db *db);
/* Whether the host may start one more sandbox now (false on a store error too). */
bool caps_host_has_room(struct db *db, const struct labd_config *cfg, int *live, unsigned *cap);
/* What user_id holds: 0 with *out, or -EIO. */
int caps_gpus_held(struct db *db, int64_t user_id, struct caps_held *out);
/* Pure: whether a new holder of want GPUs fits beside held under cap. A user who holds
 * none may always take one holder's GPUs (its size is gpus_per_runtime's or the job's
 * gpu_count's to bound); the cap stops a second holder. */
bool caps_gpus_fit(int held, int want, unsigned cap);

#endif
