/* gpus.h - the GPU pool: the devices labd hands out (whole cards, MIG
 * instances, time-sliced shares: labd/gpudev.h), what is known of each, who
 * holds which, and the lock under which one is chosen.
 *
 * Which cards are in the pool is fixed at start by config/ ([gpu] devices, the
 * device nodes found for devices = auto, or [gpu] stand_in), so the root
 * supervisor and this process agree on it. Each card becomes devices: a card
 * listed in [gpu] shares its shares; a card whose MIG mode NVML reports on its
 * MIG instances (compute instances, as the admin made them: labd never
 * changes them); any other card itself, whole. Which devices there are is read
 * at start and again on gpus_rescan (POST /api/v1/gpus/rescan); what is known
 * of each (name, memory, utilisation, temperature, processes) comes from NVML,
 * loaded with dlopen when the library is present, refreshed by a thread of
 * this module every [gpu] refresh; a request only copies the last snapshot,
 * never waits on NVML. Without NVML every field but the id, kind and card is
 * unknown, and every card not shared is whole. */
#ifndef LABD_SCHED_GPUS_H
#define LABD_SCHED_GPUS_H

#include <stdbool.h>
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
#define GPU_PROFILE_MAX 32
#define GPU_UUID_MAX 64
/* Devices in the pool at most: 16 cards of 7 MIG instances, or shares. */
#define GPUS_DEVICES_MAX 128

struct gpu_info {
	unsigned id;     /* the device id (labd/gpudev.h); a whole card's is its minor */
	enum gpudev_kind kind;
	unsigned card;   /* the card's minor: /dev/nvidia<card> */
	enum gpu_source source;
	char name[GPU_NAME_MAX];       /* the card's name, "" when unknown */
	char profile[GPU_PROFILE_MAX]; /* "1g.18gb" (MIG), "share" or "whole" */
	char uuid[GPU_UUID_MAX];       /* "MIG-…" of a MIG instance, else "" */
	/* the device's part of the card in thousandths: MIG instance memory / card
	 * memory, 1000 / count for a share, 1000 whole */
	unsigned fraction_milli;
	int64_t budget_bytes; /* a share's GPU memory budget ([gpu] shares), else -1 */
	/* a MIG instance's own memory; a share's: its budget, and in use what its
	 * holder's processes use; whole: the card's. -1 when unknown */
	int64_t memory_bytes, memory_used_bytes;
	/* the card's for a whole card or a share (time-slicing shares the whole card);
	 * a MIG instance's own when NVML gives one. -1 when unknown */
	int utilization_percent, temperature_c;
};

/* A compute process NVML reports on a pool card, with the device it uses
 * (a MIG instance's id, else the card's minor). */
struct gpu_process {
	unsigned pid;
	unsigned card, device;
	int64_t bytes; /* -1 when NVML cannot say */
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
/* Copies the last snapshot, at most max devices, in pool order (cards in
 * [gpu] devices order, each card's devices by id); the count. */
size_t gpus_snapshot(struct gpus *g, struct gpu_info *out, size_t max);
/* The devices now, pool order: the same as gpus_snapshot, as an int for
 * callers counting with ints. NULL g: 0. */
int gpus_devices(struct gpus *g, struct gpu_info *out, size_t max);
/* Reads which devices there are again (MIG instances made or removed with
 * nvidia-smi since) and their readings now. 0, or -ENODEV without NVML (the
 * devices from config are read again all the same). */
int gpus_rescan(struct gpus *g);
/* The compute processes of the last reading, at most max; the count. */
size_t gpus_processes(struct gpus *g, struct gpu_process *out, size_t max);
/* Records what a share's holder uses of the card's memory (the share budget
 * watcher's sum over the holder's processes), shown as its memory in use. */
void gpus_set_share_used(struct gpus *g, unsigned id, int64_t bytes);
/* Calls fn after each refresh (on the refresh thread; NULL: none): the share
 * budget watcher runs there, on the readings just taken. */
void gpus_on_refresh(struct gpus *g, void (*fn)(void *ctx), void *ctx);
/* "nvml", "device", "config" or "stand-in". */
const char *gpus_source_name(enum gpu_source s);

/* Held while a GPU is chosen and the runtime row moved onto it, so that two
 * starts (or a start and the queue) never pick the same one. NULL is fine. */
void gpus_alloc_lock(struct gpus *g);
void gpus_alloc_unlock(struct gpus *g);

/* One gpu_hold per pool card of cfg into out (room for cfg->n_gpu_devices),
 * from the live runtime and pool rows: a card is held when anything on it is
 * (gpudev_conflict). The count, or -EIO. */
int gpus_holders(struct db *db, const struct labd_config *cfg, int64_t now,
		 struct gpu_hold *out);
/* One gpu_hold per device of g's pool into out (at most max), in pool order,
 * from the live runtime and pool rows: a device is held when a row holds it or
 * its whole card. The count, or -EIO. */
int gpus_device_holders(struct db *db, struct gpus *g, int64_t now, struct gpu_hold *out,
			size_t max);
/* A free whole card's id into *id: 1, 0 when none is free, or -EIO. Cards
 * handed out as shares are never picked whole. */
int gpus_pick_free(struct db *db, const struct labd_config *cfg, unsigned *id);
/* Up to want free whole cards' ids into ids (comma-separated text into out,
 * len bytes): the number free (all of want when enough), or -EIO. */
int gpus_pick_free_n(struct db *db, const struct labd_config *cfg, unsigned want, char *out,
		     size_t len);
/* Up to want free devices of a kind ("whole", "share" or a MIG profile such
 * as "1g.18gb") into ids, in pool order: the number free (all of want when
 * enough; a caller needing want compares), or -EIO. NULL g: the devices of
 * cfg alone (whole cards and shares). */
int gpus_pick_free_kind(struct db *db, struct gpus *g, const struct labd_config *cfg,
			const char *kind, unsigned want, unsigned *ids);
/* One gpu_hold per device of kind (NULL: every device) into out (at most
 * max), in pool order, from the live runtime and job sandbox rows: the count,
 * or -EIO. NULL g: the devices of cfg alone. */
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
/* Whether a device of g's pool has this id; its info into *out when not NULL. */
bool gpus_find(struct gpus *g, unsigned id, struct gpu_info *out);
/* Whether h is held by anyone. */
static inline int gpus_hold_busy(const struct gpu_hold *h)
{
	return h->runtime_id != 0 || h->job_pool_id != 0;
}

#endif
