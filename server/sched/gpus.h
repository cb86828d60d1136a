/* gpus.h - the GPU pool: what is known of each GPU labd hands out, who holds
 * which, and the lock under which one is chosen.
 *
 * Which GPUs are in the pool is fixed at start by config/ ([gpu] devices, the
 * device nodes found for devices = auto, or [gpu] stand_in), so the root
 * supervisor and this process agree on it. What is known of each (name,
 * memory, utilisation, temperature) comes from NVML, loaded with dlopen when
 * the library is present, refreshed by a thread of this module every
 * [gpu] refresh; a request only copies the last snapshot, never waits on NVML.
 * Without NVML every field but the id is unknown. */
#ifndef LABD_SCHED_GPUS_H
#define LABD_SCHED_GPUS_H

#include <stddef.h>
#include <stdint.h>

#include "labd/gpudev.h"

struct db;
struct labd_config;

enum gpu_source {
	GPU_SOURCE_NVML,     /* NVML answered for this device */
	GPU_SOURCE_DEVICE,   /* a device node found by devices = auto */
	GPU_SOURCE_CONFIG,   /* listed in [gpu] devices */
	GPU_SOURCE_STAND_IN, /* [gpu] stand_in: no device at all (tests, demos) */
};

#define GPU_NAME_MAX 96

struct gpu_info {
	unsigned id; /* the device's minor number: /dev/nvidia<id> */
	enum gpu_source source;
	char name[GPU_NAME_MAX];                 /* "" when unknown */
	int64_t memory_bytes, memory_used_bytes; /* -1 when unknown */
	int utilization_percent, temperature_c;  /* -1 when unknown */
	/* the device's kind (labd/gpudev.h; id is its device id), its profile
	 * as plans name it ("whole", "share", a MIG profile "1g.18gb"), its
	 * UUID ("" unknown) and the fraction of its card it is, in thousandths
	 * (MIG: instance memory / card memory; share: 1000 / count; whole: 1000) */
	enum gpudev_kind kind;
	char profile[32];
	char uuid[64];
	unsigned fraction_milli;
};

/* Who holds a pool GPU now (runtime_id and job_pool_id 0: nobody) and when
 * it is expected free: now for a free one, else its holder's deadline (now
 * if past). A training job's sandbox (store/pools.h) holds its GPUs
 * exclusively too, while it runs a job and while it is kept warm. */
struct gpu_hold {
	unsigned id;
	int64_t runtime_id;
	int64_t job_pool_id; /* the job sandbox holding it, 0 = none */
	char user[33];
	int64_t free_at;
};

struct gpus;

/* The pool of cfg (borrowed until gpus_free); loads NVML from
 * cfg->nvml_library when it is there (its absence is logged once, not an
 * error) and starts the refresh thread. 0 and *out, or a negative errno. */
int gpus_new(const struct labd_config *cfg, struct gpus **out);
/* Stops the thread, unloads NVML, frees. NULL is fine. */
void gpus_free(struct gpus *g);
/* Copies the last snapshot, at most max GPUs, in pool order; the count. */
size_t gpus_snapshot(struct gpus *g, struct gpu_info *out, size_t max);
/* "nvml", "device", "config" or "stand-in". */
const char *gpus_source_name(enum gpu_source s);

/* Held while a GPU is chosen and the runtime row moved onto it, so that two
 * starts (or a start and the queue) never pick the same one. NULL is fine. */
void gpus_alloc_lock(struct gpus *g);
void gpus_alloc_unlock(struct gpus *g);

/* One gpu_hold per pool GPU of cfg into out (room for cfg->n_gpu_devices),
 * from the live runtime rows. The count, or -EIO. */
int gpus_holders(struct db *db, const struct labd_config *cfg, int64_t now,
		 struct gpu_hold *out);
/* A free pool GPU's id into *id: 1, 0 when none is free, or -EIO. */
int gpus_pick_free(struct db *db, const struct labd_config *cfg, unsigned *id);
/* Up to want free GPU ids into ids (comma-separated text into out, len
 * bytes): the number free (all of want when enough), or -EIO. */
int gpus_pick_free_n(struct db *db, const struct labd_config *cfg, unsigned want, char *out,
		     size_t len);
/* Devices by kind. The devices now (at most max), in pool order: the count. */
int gpus_devices(struct gpus *g, struct gpu_info *out, size_t max);
/* Up to want free devices of kind ("whole", "share" or a MIG profile; its
 * profile) into ids, in pool order: the number found (all of want when
 * enough free), or -EIO. A device is free when no live runtime or job
 * sandbox holds it or a device it conflicts with (gpudev_conflict). */
int gpus_pick_free_kind(struct db *db, struct gpus *g, const struct labd_config *cfg,
			const char *kind, unsigned want, unsigned *ids);
/* One gpu_hold per device of kind (NULL: every device) into out (at most
 * max), from the live runtime and job sandbox rows: the count, or -EIO. */
int gpus_holders_kind(struct db *db, struct gpus *g, const struct labd_config *cfg,
		      const char *kind, int64_t now, struct gpu_hold *out, size_t max);
/* How many devices of kind the pool has, busy or not. */
size_t gpus_count_kind(struct gpus *g, const struct labd_config *cfg, const char *kind);
/* The largest fraction of a card (thousandths) a device of kind is; 1000
 * when the pool has none. */
unsigned gpus_kind_fraction_milli(struct gpus *g, const struct labd_config *cfg,
				  const char *kind);
/* The fraction of its card (thousandths) the device id is; 1000 when unknown. */
unsigned gpus_fraction_milli(struct gpus *g, const struct labd_config *cfg, unsigned id);

/* Whether h is held by anyone. */
static inline int gpus_hold_busy(const struct gpu_hold *h)
{
	return h->runtime_id != 0 || h->job_pool_id != 0;
}

#endif
