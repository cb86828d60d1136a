/* slurm.h - the Slurm backend (docs/slurm.md): runtimes and job pools as Slurm jobs
 * that hold an allocation (labd-rt-<id>, labd-pool-<id>), their sandboxes built by
 * the allocated node's `labd node` over its link (nodes.h). */
#ifndef LABD_BACKEND_SLURM_H
#define LABD_BACKEND_SLURM_H

#include <stdint.h>

#include "backend/backend.h"
#include "config/config.h"

/* Listens for node links ([slurm] listen, the secret's bytes in cfg->link_secret) and
 * starts the poll thread; events go to ev (copied). cfg is borrowed for the backend's
 * life. NULL on failure (logged). */
struct backend *backend_slurm_new(const struct labd_config *cfg, const struct backend_events *ev);

/* What Slurm says of a runtime that waits for its allocation: its pending reason in
 * words (text, SLURM_TEXT_MAX) and Slurm's start estimate (epoch s, 0 when none).
 * 0, or -ENOENT when it does not wait in Slurm (or b is not this backend). */
#define BACKEND_QUEUE_TEXT_MAX 160
int backend_slurm_queue(struct backend *b, int64_t runtime_id, char *text, size_t textlen,
			int64_t *estimate_at);

/* When the runtime's node took its start (epoch s; 0 while it still waits for its
 * allocation or its node): the start timeout counts from then. 0, or -ENOENT when
 * this backend does not hold it (or b is not this backend). */
int backend_slurm_placed_at(struct backend *b, int64_t runtime_id, int64_t *at);

#endif
