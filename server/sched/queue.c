/* queue.c - the GPU queue's fair order and estimates; see queue.h. */
#include "sched/queue.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "sched/caps.h"
#include "store/gpu_queue.h"
#include "store/jobs.h"
#include "store/ledger.h"
#include "store/ledger_window.h"
#include "store/pools.h"

#define DAY_S 86400

static int fair_cmp(const void *pa, const void *pb)
{
	const struct queue_item *a = pa, *b = pb;

	if (a->gpu_s_24h != b->gpu_s_24h)
		return a->gpu_s_24h < b->gpu_s_24h ? -1 : 1;
	if (a->queued_at != b->queued_at)
		return a->queued_at < b->queued_at ? -1 : 1;
	if (a->runtime_id != b->runtime_id)
		return (a->runtime_id > b->runtime_id) - (a->runtime_id < b->runtime_id);
	return (a->job_id > b->job_id) - (a->job_id < b->job_id);
}

void queue_order(struct queue_item *items, size_t n)
{
	if (n > 1)
		qsort(items, n, sizeof(*items), fair_cmp);
}

#define ESTIMATE_GPUS_MAX 128 /* sched/gpus.h GPUS_DEVICES_MAX */

/* An entry of g GPUs (0 counts as 1) starts once its g earliest are free and holds
 * them all for length_s: its start, or 0 when the pool has fewer than g. */
static int64_t take_earliest(int64_t *t, size_t n, unsigned g, int64_t length_s)
{
	bool picked[ESTIMATE_GPUS_MAX] = {false};
	int64_t start = 0;

	if (g == 0)
		g = 1;
	if (g > n)
		return 0;
	for (unsigned k = 0; k < g; k++) {
		size_t best = n;
		for (size_t i = 0; i < n; i++)
			if (!picked[i] && (best == n || t[i] < t[best]))
				best = i;
		picked[best] = true;
		start = t[best] > start ? t[best] : start;
	}
	for (size_t i = 0; i < n; i++)
		if (picked[i])
			t[i] = start + length_s;
	return start;
}

bool queue_is_kind(const struct queue_item *item, const char *kind)
{
	const char *a = item->kind[0] ? item->kind : "whole";
	const char *b = kind && kind[0] ? kind : "whole";

	return strcmp(a, b) == 0;
}

void queue_estimate(struct queue_item *items, size_t n, const char *kind, const int64_t *free_at,
		    size_t n_gpus, int64_t now)
{
	int64_t t[ESTIMATE_GPUS_MAX];
	int place = 0;

	if (n_gpus > ESTIMATE_GPUS_MAX)
		n_gpus = ESTIMATE_GPUS_MAX;
	for (size_t g = 0; g < n_gpus; g++)
		t[g] = free_at[g] > now ? free_at[g] : now;
	for (size_t i = 0; i < n; i++) {
		if (kind && !queue_is_kind(&items[i], kind))
			continue;
		items[i].position = ++place;
		items[i].estimate_at = 0;
		if (n_gpus > 0)
			items[i].estimate_at = take_earliest(t, n_gpus, items[i].gpus,
							     items[i].length_s);
	}
}

struct usage_sum {
	int64_t from_s, to_s, gpu_s;
};

static int add_gpu_s(const struct ledger_entry *e, void *ctx)
{
	struct usage_sum *u = ctx;
	struct ledger_span span;

	ledger_entry_span(e, &span);
	/* An open entry weighs what closing it now would bill: its heartbeat
	 * moves only every LEDGER_HEARTBEAT_S, so a user whose short GPU jobs
	 * run right now would weigh nothing and go ahead of everyone again. */
	if (!e->end_at) {
		int64_t close_at = e->last_heartbeat + LEDGER_CLOSE_SLACK_S;
		span.end_s = close_at < u->to_s ? close_at : u->to_s;
	}
	if (span.kind != RUNTIME_GPU)
		return 0;
	int64_t s = ledger_clip_s(&span, u->from_s, u->to_s);
	/* at least a second: a start of this very second has begun to use its
	 * GPU, and its user's next job goes behind those who use none */
	u->gpu_s += !e->end_at && s == 0 ? 1 : s;
	return 0;
}

struct load {
	struct queue_item *items;
	size_t n, max;
};

static int add_entry(const struct gpu_queue_entry *e, void *ctx)
{
	struct load *l = ctx;

	if (l->n == l->max)
		return 1; /* stop: the rest wait for the next pass */
	l->items[l->n] = (struct queue_item){
		.runtime_id = e->runtime_id, .user_id = e->user_id, .queued_at = e->queued_at,
		.expires_at = e->expires_at, .length_s = e->length_s, .gpus = 1};
	snprintf(l->items[l->n].kind, sizeof(l->items[l->n].kind), "%s", e->gpu_kind);
	l->n++;
	return 0;
}

static int add_job(const struct job_waiting_gpu *w, void *ctx)
{
	struct load *l = ctx;

	if (l->n == l->max)
		return 1;
	l->items[l->n] = (struct queue_item){
		.job_id = w->job_id, .user_id = w->user_id, .queued_at = w->created_at,
		.expires_at = w->expires_at, .length_s = w->length_s,
		.gpus = (unsigned)w->gpu_count};
	snprintf(l->items[l->n].kind, sizeof(l->items[l->n].kind), "%s", w->gpu_kind);
	l->n++;
	return 0;
}

bool queue_listed(const int64_t *ids, size_t n, int64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

/* Whether the entry that is(items[i], id) names may take its GPUs with
 * n_free of its kind free: everything of its kind ahead of it (but the
 * excused users' jobs) could start too. */
static int turn_of(const struct queue_item *items, size_t n, bool (*is)(const struct queue_item *,
									int64_t),
		   int64_t id, unsigned n_free, const int64_t *excused, size_t n_excused)
{
	const struct queue_item *me = NULL;
	unsigned ahead = 0;

	for (size_t i = 0; i < n && !me; i++)
		if (is(&items[i], id))
			me = &items[i];
	if (!me)
		return 0;
	for (const struct queue_item *it = items; it < me; it++)
		if (queue_is_kind(it, me->kind) &&
		    (!it->job_id || !queue_listed(excused, n_excused, it->user_id)))
			ahead += it->gpus ? it->gpus : 1;
	return ahead + (me->gpus ? me->gpus : 1) <= n_free;
}

static bool is_job(const struct queue_item *it, int64_t id)
{
	return it->job_id && it->job_id == id;
}

static bool is_runtime(const struct queue_item *it, int64_t id)
{
	return it->runtime_id && it->runtime_id == id;
}

int queue_job_turn(const struct queue_item *items, size_t n, int64_t job_id, unsigned n_free,
		   const int64_t *excused, size_t n_excused)
{
	return turn_of(items, n, is_job, job_id, n_free, excused, n_excused);
}

int queue_runtime_turn(const struct queue_item *items, size_t n, int64_t runtime_id,
		       unsigned n_free, const int64_t *excused, size_t n_excused)
{
	return turn_of(items, n, is_runtime, runtime_id, n_free, excused, n_excused);
}

/* Whether a job of user_id for gpus GPUs waits for caps of its user's own. */
static int held_back(struct db *db, const struct labd_config *cfg, int64_t user_id,
		     unsigned gpus)
{
	struct caps_held h;
	int live = pools_count_live(db, user_id);

	if (live < 0 || caps_gpus_held(db, user_id, &h) < 0)
		return -EIO;
	if ((unsigned)live >= cfg->jobs_max_pools_per_user)
		return 1;
	return !caps_gpus_fit(h.runtime_gpus + h.pool_gpus, (int)gpus, cfg->quota_gpus_held);
}

int queue_excused(struct db *db, const struct labd_config *cfg, const struct queue_item *items,
		  size_t n, int64_t *excused, size_t max)
{
	size_t k = 0;

	for (size_t i = 0; i < n && k < max; i++) {
		if (!items[i].job_id || queue_listed(excused, k, items[i].user_id))
			continue;
		int rc = held_back(db, cfg, items[i].user_id, items[i].gpus);
		if (rc < 0)
			return -EIO;
		if (rc)
			excused[k++] = items[i].user_id;
	}
	return (int)k;
}

/* The first of items[0..i) with items[i]'s user, or i. */
static size_t user_seen(const struct queue_item *items, size_t i)
{
	for (size_t k = 0; k < i; k++)
		if (items[k].user_id == items[i].user_id)
			return k;
	return i;
}

int queue_load(struct db *db, int64_t now, struct queue_item *items, size_t max)
{
	struct load l = {items, 0, max};

	if (gpu_queue_each(db, add_entry, &l) < 0 || jobs_each_waiting_gpu(db, add_job, &l) < 0)
		return -EIO;
	for (size_t i = 0; i < l.n; i++) {
		struct usage_sum u = {now - DAY_S, now, 0};
		size_t same = user_seen(items, i);
		if (same < i) { /* a user's later turns weigh what the first did */
			items[i].gpu_s_24h = items[same].gpu_s_24h;
			continue;
		}
		/* to the end of this second: an entry begun at now is read too */
		if (ledger_each(db, items[i].user_id, u.from_s, u.to_s + 1, add_gpu_s, &u) < 0)
			return -EIO;
		items[i].gpu_s_24h = u.gpu_s;
	}
	return (int)l.n;
}
