/* gpus.c - the GPU pool: snapshot, refresh ticker, holders; see gpus.h. */
#include "sched/gpus.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "labd/ticker.h"
#include "sched/nvml.h"
#include "store/pools.h"
#include "store/runtimes.h"

struct gpus {
	const struct labd_config *cfg;
	struct nvml *nvml; /* NULL: not loaded; used only by the thread once it runs */
	pthread_mutex_t lock; /* guards snap */
	struct gpu_info snap[CONFIG_MAX_GPUS];
	size_t n;
	pthread_mutex_t alloc; /* gpus_alloc_lock */
	struct ticker *ticker; /* the refresh, while NVML is loaded */
};

const char *gpus_source_name(enum gpu_source s)
{
	static const char *const names[] = {"nvml", "device", "config", "stand-in"};
	return names[s];
}

/* What is known without NVML: the id and where it came from. */
static void base_info(const struct labd_config *cfg, struct gpu_info *out, size_t *n)
{
	*n = cfg->n_gpu_devices;
	for (size_t i = 0; i < *n; i++)
		out[i] = (struct gpu_info){
			.id = cfg->gpu_devices[i],
			.source = cfg->gpu_stand_in	 ? GPU_SOURCE_STAND_IN
				  : cfg->gpu_devices_auto ? GPU_SOURCE_DEVICE
							  : GPU_SOURCE_CONFIG,
			.memory_bytes = -1, .memory_used_bytes = -1,
			.utilization_percent = -1, .temperature_c = -1,
			.kind = GPUDEV_WHOLE, .profile = "whole", .fraction_milli = 1000};
}

/* One refresh: NVML's numbers into a fresh copy, then swapped in. */
static void refresh(struct gpus *g)
{
	struct gpu_info fresh[CONFIG_MAX_GPUS];
	size_t n;

	base_info(g->cfg, fresh, &n);
	nvml_read(g->nvml, fresh, n);
	pthread_mutex_lock(&g->lock);
	memcpy(g->snap, fresh, sizeof(fresh));
	g->n = n;
	pthread_mutex_unlock(&g->lock);
}

/* The refresh thread's pass: NVML's numbers every [gpu] refresh. */
static long long refresh_pass(void *arg)
{
	struct gpus *g = arg;

	refresh(g);
	return clock_ms() + (long long)g->cfg->gpu_refresh_s * 1000;
}

int gpus_new(const struct labd_config *cfg, struct gpus **out)
{
	struct gpus *g = calloc(1, sizeof(*g));
	char why[300] = "";

	if (!g)
		return -ENOMEM;
	g->cfg = cfg;
	pthread_mutex_init(&g->lock, NULL);
	pthread_mutex_init(&g->alloc, NULL);
	base_info(cfg, g->snap, &g->n);
	/* Only a pool of real devices is worth asking NVML about. */
	if (cfg->n_gpu_devices > 0 && !cfg->gpu_stand_in) {
		if (nvml_open(cfg->nvml_library, &g->nvml, why, sizeof(why)) < 0)
			log_warn("gpus: NVML not used: %s; GPUs show no name, memory or "
				 "utilisation", why);
		else
			log_info("gpus: NVML loaded from %s", cfg->nvml_library);
	}
	if (g->nvml && ticker_start("gpus", refresh_pass, g, &g->ticker) < 0) {
		gpus_free(g);
		return -EAGAIN;
	}
	*out = g;
	return 0;
}

void gpus_free(struct gpus *g)
{
	if (!g)
		return;
	ticker_stop(g->ticker);
	nvml_close(g->nvml);
	pthread_mutex_destroy(&g->alloc);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

size_t gpus_snapshot(struct gpus *g, struct gpu_info *out, size_t max)
{
	size_t n;

	pthread_mutex_lock(&g->lock);
	n = g->n < max ? g->n : max;
	memcpy(out, g->snap, n * sizeof(*out));
	pthread_mutex_unlock(&g->lock);
	return n;
}

void gpus_alloc_lock(struct gpus *g)
{
	if (g)
		pthread_mutex_lock(&g->alloc);
}

void gpus_alloc_unlock(struct gpus *g)
{
	if (g)
		pthread_mutex_unlock(&g->alloc);
}

struct holders {
	struct gpu_hold *h;
	size_t n;
	int64_t now;
};

/* Marks the pool GPUs that the live row r holds. */
static int note_holder(const struct runtime *r, void *ctx)
{
	struct holders *hs = ctx;
	char copy[RUNTIME_GPUS_MAX], *save = NULL;

	snprintf(copy, sizeof(copy), "%s", r->gpus);
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		unsigned id = (unsigned)strtoul(t, NULL, 10);
		for (size_t i = 0; i < hs->n; i++) {
			if (hs->h[i].id != id)
				continue;
			hs->h[i].runtime_id = r->id;
			snprintf(hs->h[i].user, sizeof(hs->h[i].user), "%s", r->user_name);
			hs->h[i].free_at = r->deadline > hs->now ? r->deadline : hs->now;
		}
	}
	return 0;
}

/* Marks the pool GPUs that the live job sandbox p holds (until its deadline). */
static int note_pool(const struct pool *p, void *ctx)
{
	struct holders *hs = ctx;
	char copy[RUNTIME_GPUS_MAX], *save = NULL;

	snprintf(copy, sizeof(copy), "%s", p->gpus);
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		unsigned id = (unsigned)strtoul(t, NULL, 10);
		for (size_t i = 0; i < hs->n; i++) {
			if (hs->h[i].id != id)
				continue;
			hs->h[i].job_pool_id = p->id;
			snprintf(hs->h[i].user, sizeof(hs->h[i].user), "%s", p->user_name);
			hs->h[i].free_at = p->deadline > hs->now ? p->deadline : hs->now;
		}
	}
	return 0;
}

int gpus_holders(struct db *db, const struct labd_config *cfg, int64_t now, struct gpu_hold *out)
{
	struct holders hs = {out, cfg->n_gpu_devices, now};

	for (size_t i = 0; i < hs.n; i++)
		out[i] = (struct gpu_hold){.id = cfg->gpu_devices[i], .free_at = now};
	if (runtimes_each_live(db, note_holder, &hs) < 0 || pools_each_live(db, note_pool, &hs) < 0)
		return -EIO;
	return (int)hs.n;
}

int gpus_pick_free_n(struct db *db, const struct labd_config *cfg, unsigned want, char *out,
		     size_t len)
{
	struct gpu_hold h[CONFIG_MAX_GPUS];
	int n = gpus_holders(db, cfg, 0, h), found = 0;
	size_t used = 0;

	if (n < 0)
		return n;
	out[0] = '\0';
	for (int i = 0; i < n && (unsigned)found < want; i++) {
		if (gpus_hold_busy(&h[i]))
			continue;
		int w = snprintf(out + used, len - used, "%s%u", found ? "," : "", h[i].id);
		if (w < 0 || (size_t)w >= len - used)
			break;
		used += (size_t)w;
		found++;
	}
	return found;
}

int gpus_pick_free(struct db *db, const struct labd_config *cfg, unsigned *id)
{
	struct gpu_hold h[CONFIG_MAX_GPUS];
	int n = gpus_holders(db, cfg, 0, h);

	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		if (!gpus_hold_busy(&h[i])) {
			*id = h[i].id;
			return 1;
		}
	}
	return 0;
}

/* ---- devices by kind ---- */

int gpus_devices(struct gpus *g, struct gpu_info *out, size_t max)
{
	return g ? (int)gpus_snapshot(g, out, max) : 0;
}

struct kind_holders {
	struct gpu_hold *h;
	size_t n;
	int64_t now;
};

/* Marks the devices that the GPU ids text held (of a live row) blocks. */
static void note_ids(struct kind_holders *hs, const char *held, int64_t runtime_id,
		     int64_t pool_id, const char *user, int64_t deadline)
{
	char copy[RUNTIME_GPUS_MAX], *save = NULL;

	snprintf(copy, sizeof(copy), "%s", held);
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		unsigned id = (unsigned)strtoul(t, NULL, 10);
		for (size_t i = 0; i < hs->n; i++) {
			if (!gpudev_conflict(hs->h[i].id, id))
				continue;
			hs->h[i].runtime_id = runtime_id;
			hs->h[i].job_pool_id = pool_id;
			snprintf(hs->h[i].user, sizeof(hs->h[i].user), "%s", user);
			int64_t at = deadline > hs->now ? deadline : hs->now;
			hs->h[i].free_at = at > hs->h[i].free_at ? at : hs->h[i].free_at;
		}
	}
}

static int note_kind_runtime(const struct runtime *r, void *ctx)
{
	note_ids(ctx, r->gpus, r->id, 0, r->user_name, r->deadline);
	return 0;
}

static int note_kind_pool(const struct pool *p, void *ctx)
{
	note_ids(ctx, p->gpus, 0, p->id, p->user_name, p->deadline);
	return 0;
}

int gpus_holders_kind(struct db *db, struct gpus *g, const struct labd_config *cfg,
		      const char *kind, int64_t now, struct gpu_hold *out, size_t max)
{
	struct gpu_info devs[CONFIG_MAX_GPUS];
	struct kind_holders hs = {out, 0, now};
	size_t n;

	if (g)
		n = gpus_snapshot(g, devs, CONFIG_MAX_GPUS);
	else
		base_info(cfg, devs, &n);
	for (size_t i = 0; i < n && hs.n < max; i++)
		if (!kind || strcmp(devs[i].profile, kind) == 0)
			out[hs.n++] = (struct gpu_hold){.id = devs[i].id, .free_at = now};
	if (runtimes_each_live(db, note_kind_runtime, &hs) < 0 ||
	    pools_each_live(db, note_kind_pool, &hs) < 0)
		return -EIO;
	return (int)hs.n;
}

int gpus_pick_free_kind(struct db *db, struct gpus *g, const struct labd_config *cfg,
			const char *kind, unsigned want, unsigned *ids)
{
	struct gpu_hold h[CONFIG_MAX_GPUS];
	int n = gpus_holders_kind(db, g, cfg, kind, 0, h, CONFIG_MAX_GPUS);
	unsigned found = 0;

	if (n < 0)
		return n;
	for (int i = 0; i < n && found < want; i++)
		if (!gpus_hold_busy(&h[i]))
			ids[found++] = h[i].id;
	return (int)found;
}

size_t gpus_count_kind(struct gpus *g, const struct labd_config *cfg, const char *kind)
{
	struct gpu_info devs[CONFIG_MAX_GPUS];
	size_t n, k = 0;

	if (g)
		n = gpus_snapshot(g, devs, CONFIG_MAX_GPUS);
	else
		base_info(cfg, devs, &n);
	for (size_t i = 0; i < n; i++)
		k += strcmp(devs[i].profile, kind) == 0;
	return k;
}

unsigned gpus_kind_fraction_milli(struct gpus *g, const struct labd_config *cfg,
				  const char *kind)
{
	struct gpu_info devs[CONFIG_MAX_GPUS];
	unsigned most = 0;
	size_t n;

	if (g)
		n = gpus_snapshot(g, devs, CONFIG_MAX_GPUS);
	else
		base_info(cfg, devs, &n);
	for (size_t i = 0; i < n; i++)
		if (strcmp(devs[i].profile, kind) == 0 && devs[i].fraction_milli > most)
			most = devs[i].fraction_milli;
	return most ? most : 1000;
}

unsigned gpus_fraction_milli(struct gpus *g, const struct labd_config *cfg, unsigned id)
{
	struct gpu_info devs[CONFIG_MAX_GPUS];
	size_t n;

	if (g)
		n = gpus_snapshot(g, devs, CONFIG_MAX_GPUS);
	else
		base_info(cfg, devs, &n);
	for (size_t i = 0; i < n; i++)
		if (devs[i].id == id && devs[i].fraction_milli > 0)
			return devs[i].fraction_milli;
	return 1000;
}
