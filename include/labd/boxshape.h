/* boxshape.h - the size of one sandbox, as every layer speaks of it: what the web
 * process asks for (backend.h's starts), what the protocol carries (the same fields
 * in sandbox_start and pool_start, proto.c) and what the supervisor reads back
 * before it checks and caps it (supervisor/startcheck.h), and what the web side
 * keeps: a runtime's plan sizes (runtime/moves.h runtime_resources) and the shape a
 * warm pool is matched on (store/pools.h pool_shape). A runtime and a job pool are
 * sized alike; only what runs inside differs.
 *
 * A contract between parts, so it lives at rank 0: no functions, no allocation. */
#ifndef LABD_BOXSHAPE_H
#define LABD_BOXSHAPE_H

#include <stdbool.h>
#include <stdint.h>

#define BOX_GPUS_MAX 16 /* as SANDBOX_MAX_GPUS: GPUs one sandbox may hold */

struct box_shape {
	unsigned gpus[BOX_GPUS_MAX]; /* GPU minors, each at most once */
	unsigned n_gpus;
	/* the plan's sizes; 0 = the supervisor's configured default, and the
	 * supervisor refuses any above the machine caps ([runtime] *_max) */
	int64_t memory_bytes, cpus_milli, home_size_bytes;
	bool network;               /* egress; false = loopback only */
	int64_t egress_bytes_per_s; /* each way, 0 = no limit */
	/* an [images] NAME the supervisor maps to a folder itself; "" or NULL = the
	 * host's root. Borrowed: from the caller, or from the message it was read from */
	const char *image;
};

#endif
