/* gpus.c - the GPU pool of devices: layout, snapshot, refresh ticker,
 * holders, free devices; see gpus.h. */
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

#define GPUS_PROCESSES_MAX (CONFIG_MAX_GPUS * NVML_PROCESSES_MAX)

struct gpus {
	const struct labd_config *cfg;
	struct nvml *nvml;    /* NULL: not loaded */
	pthread_mutex_t lock; /* guards snap, n, procs, n_procs */
	struct gpu_info snap[GPUS_DEVICES_MAX];
	size_t n;
	struct gpu_process procs[GPUS_PROCESSES_MAX];
	size_t n_procs;
	pthread_mutex_t scan; /* one NVML reading at a time (the thread, a rescan); guards cards,
				 fresh and fresh_procs */
	struct nvml_card cards[CONFIG_MAX_GPUS];
	struct gpu_info fresh[GPUS_DEVICES_MAX];       /* a reading being made */
	struct gpu_process fresh_procs[GPUS_PROCESSES_MAX];
	pthread_mutex_t hook; /* guards on_refresh: held while it runs */
	void (*on_refresh)(void *ctx);
	void *on_refresh_ctx;
	pthread_mutex_t alloc;  /* gpus_alloc_lock */
	struct ticker *ticker;  /* the refresh, while NVML is loaded */
};

const char *gpus_source_name(enum gpu_source s)
{
	static const char *const names[] = {"nvml", "device", "config", "stand-in"};
	return names[s];
}

static const struct config_gpu_share *share_of(const struct labd_config *cfg, unsigned minor)
{
	for (unsigned i = 0; i < cfg->n_gpu_shares; i++)
		if (cfg->gpu_shares[i].minor == minor)
			return &cfg->gpu_shares[i];
	return NULL;
}

static const struct nvml_card *card_of(const struct nvml_card *cards, size_t n, unsigned minor)
{
	for (size_t i = 0; i < n; i++)
		if (cards[i].minor == minor)
			return &cards[i];
	return NULL;
}

/* A device with nothing read yet: its id, kind, card and where it came from. */
static struct gpu_info blank(const struct labd_config *cfg, unsigned id)
{
	struct gpudev d;

	gpudev_decode(id, &d);
	return (struct gpu_info){
		.id = id, .kind = d.kind, .card = d.minor,
		.source = cfg->gpu_stand_in	 ? GPU_SOURCE_STAND_IN
			  : cfg->gpu_devices_auto ? GPU_SOURCE_DEVICE
						  : GPU_SOURCE_CONFIG,
		.fraction_milli = 1000, .budget_bytes = -1,
		.memory_bytes = -1, .memory_used_bytes = -1,
		.utilization_percent = -1, .temperature_c = -1};
}

static void push(struct gpu_info *out, size_t *n, size_t max, struct gpu_info info)
{
	if (*n < max)
		out[(*n)++] = info;
	else
		log_warn("gpus: more than %d devices; device %u left out", GPUS_DEVICES_MAX, info.id);
}

/* The MIG instances of card c (as NVML listed them), ordered by id. */
static void mig_layout(const struct labd_config *cfg, const struct nvml_card *c,
		       struct gpu_info *out, size_t *n, size_t max)
{
	size_t first = *n;

	for (size_t i = 0; i < c->n_mig; i++) {
		const struct nvml_mig *m = &c->mig_devices[i];
		struct gpudev d = {.kind = GPUDEV_MIG, .minor = c->minor, .gi = m->gi, .ci = m->ci};
		unsigned id;
		if (!gpudev_encode(&d, &id))
			continue;
		struct gpu_info info = blank(cfg, id);
		snprintf(info.profile, sizeof(info.profile), "%s", m->profile);
		if (m->memory_bytes > 0 && c->memory_bytes > 0)
			info.fraction_milli = (unsigned)(m->memory_bytes * 1000 / c->memory_bytes);
		push(out, n, max, info);
	}
	for (size_t i = first + 1; i < *n; i++) /* insertion sort by id */
		for (size_t k = i; k > first && out[k - 1].id > out[k].id; k--) {
			struct gpu_info t = out[k];
			out[k] = out[k - 1];
			out[k - 1] = t;
		}
}

/* Which devices each pool card is: MIG instances (NVML says MIG is on),
 * shares ([gpu] shares), else the card whole. cards NULL: without NVML. */
static size_t layout(const struct labd_config *cfg, const struct nvml_card *cards,
		     size_t n_cards, struct gpu_info *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < cfg->n_gpu_devices; i++) {
		unsigned minor = cfg->gpu_devices[i];
		const struct nvml_card *c = cards ? card_of(cards, n_cards, minor) : NULL;
		const struct config_gpu_share *sh = share_of(cfg, minor);
		if (c && c->mig) {
			if (sh)
				log_warn("gpus: card %u has MIG on: its MIG instances are handed "
					 "out, not the shares [gpu] shares lists for it", minor);
			mig_layout(cfg, c, out, &n, max);
			continue;
		}
		for (unsigned s = 0; sh && s < sh->count; s++) {
			struct gpudev d = {.kind = GPUDEV_SHARE, .minor = minor, .share = s};
			unsigned id;
			if (!gpudev_encode(&d, &id))
				continue;
			struct gpu_info info = blank(cfg, id);
			snprintf(info.profile, sizeof(info.profile), "share");
			info.fraction_milli = 1000 / sh->count;
			info.budget_bytes = sh->memory_bytes;
			info.memory_bytes = sh->memory_bytes;
			push(out, &n, max, info);
		}
		if (!sh) {
			struct gpu_info info = blank(cfg, minor);
			snprintf(info.profile, sizeof(info.profile), "whole");
			push(out, &n, max, info);
		}
	}
	return n;
}

/* NVML's numbers for one device from its card's reading. */
static void fill(struct gpu_info *g, const struct nvml_card *c)
{
	g->source = GPU_SOURCE_NVML;
	snprintf(g->name, sizeof(g->name), "%s", c->name);
	g->temperature_c = c->temperature_c;
	if (g->kind == GPUDEV_WHOLE) {
		g->memory_bytes = c->memory_bytes;
		g->memory_used_bytes = c->memory_used_bytes;
	}
	if (g->kind != GPUDEV_MIG) { /* time-slicing shares the whole card */
		g->utilization_percent = c->utilization_percent;
		return;
	}
	struct gpudev d;
	gpudev_decode(g->id, &d);
	g->memory_bytes = g->memory_used_bytes = -1;
	g->utilization_percent = -1;
	for (size_t i = 0; i < c->n_mig; i++) {
		const struct nvml_mig *m = &c->mig_devices[i];
		if (m->gi != d.gi || m->ci != d.ci)
			continue;
		snprintf(g->uuid, sizeof(g->uuid), "%s", m->uuid);
		g->memory_bytes = m->memory_bytes;
		g->memory_used_bytes = m->memory_used_bytes;
		g->utilization_percent = m->utilization_percent;
	}
}

/* The processes of the cards read, each with the device it uses. */
static size_t processes_of(const struct nvml_card *cards, size_t n_cards, struct gpu_process *out)
{
	size_t n = 0;

	for (size_t i = 0; i < n_cards; i++)
		for (size_t k = 0; k < cards[i].n_processes && n < GPUS_PROCESSES_MAX; k++) {
			const struct nvml_process *p = &cards[i].processes[k];
			struct gpudev d = {.kind = GPUDEV_MIG, .minor = cards[i].minor,
					   .gi = p->gi, .ci = p->ci};
			unsigned device = cards[i].minor;
			if (cards[i].mig && !gpudev_encode(&d, &device))
				device = cards[i].minor;
			out[n++] = (struct gpu_process){p->pid, cards[i].minor, device, p->bytes};
		}
	return n;
}

/* One reading: NVML's numbers into the devices there are (rescan: which
 * devices there are read anew), then swapped in. A share keeps what the
 * watcher last recorded as used. */
static void refresh(struct gpus *g, bool rescan)
{
	struct gpu_info *fresh = g->fresh; /* under g->scan */
	struct gpu_process *procs = g->fresh_procs;
	size_t n, n_cards, n_procs;

	pthread_mutex_lock(&g->scan);
	n_cards = nvml_read_cards(g->nvml, g->cards, CONFIG_MAX_GPUS);
	if (rescan) {
		n = layout(g->cfg, g->nvml ? g->cards : NULL, n_cards, fresh, GPUS_DEVICES_MAX);
	} else {
		pthread_mutex_lock(&g->lock);
		n = g->n;
		memcpy(fresh, g->snap, n * sizeof(*fresh));
		pthread_mutex_unlock(&g->lock);
	}
	for (size_t i = 0; i < n; i++) {
		const struct nvml_card *c = card_of(g->cards, n_cards, fresh[i].card);
		if (c)
			fill(&fresh[i], c);
	}
	n_procs = processes_of(g->cards, n_cards, procs);
	pthread_mutex_lock(&g->lock);
	for (size_t i = 0; i < n; i++) /* the share's use, as the watcher last summed it */
		for (size_t k = 0; k < g->n && fresh[i].kind == GPUDEV_SHARE; k++)
			if (g->snap[k].id == fresh[i].id)
				fresh[i].memory_used_bytes = g->snap[k].memory_used_bytes;
	memcpy(g->snap, fresh, n * sizeof(*fresh));
	g->n = n;
	memcpy(g->procs, procs, n_procs * sizeof(*procs));
	g->n_procs = n_procs;
	pthread_mutex_unlock(&g->lock);
	pthread_mutex_unlock(&g->scan);
}

/* The refresh thread's pass: NVML's numbers every [gpu] refresh, then the
 * watcher on them. */
static long long refresh_pass(void *arg)
{
	struct gpus *g = arg;

	refresh(g, false);
	pthread_mutex_lock(&g->hook);
	if (g->on_refresh)
		g->on_refresh(g->on_refresh_ctx);
	pthread_mutex_unlock(&g->hook);
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
	pthread_mutex_init(&g->scan, NULL);
	pthread_mutex_init(&g->hook, NULL);
	pthread_mutex_init(&g->alloc, NULL);
	/* Only a pool of real devices is worth asking NVML about. */
	if (cfg->n_gpu_devices > 0 && !cfg->gpu_stand_in) {
		if (nvml_open(cfg->nvml_library, &g->nvml, why, sizeof(why)) < 0)
			log_warn("gpus: NVML not used: %s; GPUs show no name, memory or "
				 "utilisation, and no MIG instances", why);
		else
			log_info("gpus: NVML loaded from %s", cfg->nvml_library);
	}
	refresh(g, true);
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
	pthread_mutex_destroy(&g->hook);
	pthread_mutex_destroy(&g->scan);
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

int gpus_devices(struct gpus *g, struct gpu_info *out, size_t max)
{
	return g ? (int)gpus_snapshot(g, out, max) : 0;
}

int gpus_rescan(struct gpus *g)
{
	refresh(g, true);
	log_info("gpus: devices read again: %zu", g->n);
	return g->nvml ? 0 : -ENODEV;
}

size_t gpus_processes(struct gpus *g, struct gpu_process *out, size_t max)
{
	size_t n;

	pthread_mutex_lock(&g->lock);
	n = g->n_procs < max ? g->n_procs : max;
	memcpy(out, g->procs, n * sizeof(*out));
	pthread_mutex_unlock(&g->lock);
	return n;
}

void gpus_set_share_used(struct gpus *g, unsigned id, int64_t bytes)
{
	pthread_mutex_lock(&g->lock);
	for (size_t i = 0; i < g->n; i++)
		if (g->snap[i].id == id && g->snap[i].kind == GPUDEV_SHARE)
			g->snap[i].memory_used_bytes = bytes;
	pthread_mutex_unlock(&g->lock);
}

void gpus_on_refresh(struct gpus *g, void (*fn)(void *ctx), void *ctx)
{
	pthread_mutex_lock(&g->hook); /* after a pass under way */
	g->on_refresh = fn;
	g->on_refresh_ctx = ctx;
	pthread_mutex_unlock(&g->hook);
}

bool gpus_find(struct gpus *g, unsigned id, struct gpu_info *out)
{
	bool found = false;

	pthread_mutex_lock(&g->lock);
	for (size_t i = 0; i < g->n && !found; i++)
		if (g->snap[i].id == id) {
			found = true;
			if (out)
				*out = g->snap[i];
		}
	pthread_mutex_unlock(&g->lock);
	return found;
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

/* Marks the holds that a row holding the ids in text ("0,65792") takes: the
 * same device, or a whole card and what is on it. */
static void mark(struct holders *hs, const char *text, int64_t runtime_id, int64_t pool_id,
		 const char *user, int64_t deadline)
{
	char copy[RUNTIME_GPUS_MAX], *save = NULL;

	snprintf(copy, sizeof(copy), "%s", text);
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		unsigned id = (unsigned)strtoul(t, NULL, 10);
		for (size_t i = 0; i < hs->n; i++) {
			if (!gpudev_conflict(hs->h[i].id, id))
				continue;
			int64_t at = deadline > hs->now ? deadline : hs->now;
			hs->h[i].runtime_id = runtime_id;
			hs->h[i].job_pool_id = pool_id;
			snprintf(hs->h[i].user, sizeof(hs->h[i].user), "%s", user);
			/* a whole card under several holders is free when the last lets go */
			hs->h[i].free_at = at > hs->h[i].free_at ? at : hs->h[i].free_at;
		}
	}
}

static int note_holder(const struct runtime *r, void *ctx)
{
	mark(ctx, r->gpus, r->id, 0, r->user_name, r->deadline);
	return 0;
}

static int note_pool(const struct pool *p, void *ctx)
{
	mark(ctx, p->gpus, 0, p->id, p->user_name, p->deadline);
	return 0;
}

/* Fills the holds of the n ids in ids from the live rows. */
static int holds_of(struct db *db, const unsigned *ids, size_t n, int64_t now,
		    struct gpu_hold *out)
{
	struct holders hs = {out, n, now};

	for (size_t i = 0; i < n; i++)
		out[i] = (struct gpu_hold){.id = ids[i], .free_at = now};
	if (runtimes_each_live(db, note_holder, &hs) < 0 || pools_each_live(db, note_pool, &hs) < 0)
		return -EIO;
	return (int)n;
}

int gpus_holders(struct db *db, const struct labd_config *cfg, int64_t now, struct gpu_hold *out)
{
	return holds_of(db, cfg->gpu_devices, cfg->n_gpu_devices, now, out);
}

/* The devices now, in a fresh array the caller frees: g's snapshot, or without
 * g those of cfg alone. NULL (and *n 0) when memory is short. */
static struct gpu_info *devices_now(struct gpus *g, const struct labd_config *cfg, size_t *n)
{
	struct gpu_info *info = calloc(GPUS_DEVICES_MAX, sizeof(*info));

	*n = !info ? 0
	     : g   ? gpus_snapshot(g, info, GPUS_DEVICES_MAX)
		   : layout(cfg, NULL, 0, info, GPUS_DEVICES_MAX);
	return info;
}

static bool of_kind(const struct gpu_info *d, const char *kind)
{
	if (!strcmp(kind, "whole"))
		return d->kind == GPUDEV_WHOLE;
	if (!strcmp(kind, "share"))
		return d->kind == GPUDEV_SHARE;
	return d->kind == GPUDEV_MIG && !strcmp(d->profile, kind);
}

int gpus_holders_kind(struct db *db, struct gpus *g, const struct labd_config *cfg,
		      const char *kind, int64_t now, struct gpu_hold *out, size_t max)
{
	unsigned ids[GPUS_DEVICES_MAX] = {0};
	size_t n, k = 0;
	struct gpu_info *info = devices_now(g, cfg, &n);

	if (!info)
		return -EIO;
	for (size_t i = 0; i < n && k < max; i++)
		if (!kind || of_kind(&info[i], kind))
			ids[k++] = info[i].id;
	free(info);
	return holds_of(db, ids, k, now, out);
}

int gpus_device_holders(struct db *db, struct gpus *g, int64_t now, struct gpu_hold *out,
			size_t max)
{
	return gpus_holders_kind(db, g, g->cfg, NULL, now, out, max);
}

int gpus_pick_free_kind(struct db *db, struct gpus *g, const struct labd_config *cfg,
			const char *kind, unsigned want, unsigned *ids)
{
	struct gpu_hold *h = calloc(GPUS_DEVICES_MAX, sizeof(*h));
	int n = h ? gpus_holders_kind(db, g, cfg, kind, 0, h, GPUS_DEVICES_MAX) : -EIO;
	unsigned found = 0;

	for (int i = 0; i < n && found < want; i++)
		if (!gpus_hold_busy(&h[i]))
			ids[found++] = h[i].id;
	free(h);
	return n < 0 ? n : (int)found;
}

size_t gpus_count_kind(struct gpus *g, const struct labd_config *cfg, const char *kind)
{
	size_t n, k = 0;
	struct gpu_info *info = devices_now(g, cfg, &n);

	for (size_t i = 0; i < n; i++)
		k += of_kind(&info[i], kind);
	free(info);
	return k;
}

unsigned gpus_kind_fraction_milli(struct gpus *g, const struct labd_config *cfg,
				  const char *kind)
{
	size_t n;
	struct gpu_info *info = devices_now(g, cfg, &n);
	unsigned most = 0;

	for (size_t i = 0; i < n; i++)
		if (of_kind(&info[i], kind) && info[i].fraction_milli > most)
			most = info[i].fraction_milli;
	free(info);
	return most ? most : 1000;
}

unsigned gpus_fraction_milli(struct gpus *g, const struct labd_config *cfg, unsigned id)
{
	size_t n;
	struct gpu_info *info = devices_now(g, cfg, &n);
	unsigned f = 1000;

	for (size_t i = 0; i < n; i++)
		if (info[i].id == id && info[i].fraction_milli > 0)
			f = info[i].fraction_milli;
	free(info);
	return f;
}

int gpus_pick_free_n(struct db *db, const struct labd_config *cfg, unsigned want, char *out,
		     size_t len)
{
	unsigned ids[GPUS_DEVICES_MAX];
	int n = gpus_pick_free_kind(db, NULL, cfg, "whole",
				    want < GPUS_DEVICES_MAX ? want : GPUS_DEVICES_MAX, ids);
	size_t used = 0;
	int found = 0;

	if (n < 0)
		return n;
	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		int w = snprintf(out + used, len - used, "%s%u", found ? "," : "", ids[i]);
		if (w < 0 || (size_t)w >= len - used)
			break;
		used += (size_t)w;
		found++;
	}
	return found;
}

int gpus_pick_free(struct db *db, const struct labd_config *cfg, unsigned *id)
{
	return gpus_pick_free_kind(db, NULL, cfg, "whole", 1, id);
}
