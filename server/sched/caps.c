/* caps.c - live sandboxes and GPUs held, counted from the store; see caps.h. */
#include "sched/caps.h"

#include <errno.h>
#include <string.h>

#include "config/capacity.h"
#include "config/config.h"
#include "store/jobs.h"
#include "store/pools.h"
#include "store/runtimes.h"

/* The GPUs a "0,1" list names. */
static int count_gpus(const char *list)
{
	int n = list[0] ? 1 : 0;

	for (const char *c = list; *c; c++)
		n += *c == ',';
	return n;
}

static int count_runtime(const struct runtime *r, void *ctx)
{
	*(int *)ctx += r->state != RUNTIME_QUEUED;
	return 0;
}

static int count_pool(const struct pool *p, void *ctx)
{
	(void)p;
	++*(int *)ctx;
	return 0;
}

int caps_live_sandboxes(struct db *db)
{
	int n = 0;

	if (runtimes_each_live(db, count_runtime, &n) < 0 || pools_each_live(db, count_pool, &n) < 0)
		return -EIO;
	return n;
}

bool caps_host_has_room(struct db *db, const struct labd_config *cfg, int *live, unsigned *cap)
{
	*live = caps_live_sandboxes(db);
	*cap = capacity_max_sandboxes(cfg);
	return *live >= 0 && (unsigned)*live < *cap;
}

struct held_walk {
	int64_t user_id;
	struct caps_held *out;
};

static int held_runtime(const struct runtime *r, void *ctx)
{
	struct held_walk *w = ctx;

	/* a runtime queued for a GPU counts as holding one: a job that started
	 * meanwhile would hold a second once the queue admits it */
	if (r->user_id == w->user_id && r->kind == RUNTIME_GPU)
		w->out->runtime_gpus += r->state == RUNTIME_QUEUED && !r->gpus[0] ? 1
										 : count_gpus(r->gpus);
	return 0;
}

static int held_pool(const struct pool *p, void *ctx)
{
	struct held_walk *w = ctx;

	if (p->user_id != w->user_id)
		return 0;
	if (p->state == POOL_AVAILABLE)
		w->out->warm_gpus += count_gpus(p->gpus);
	else
		w->out->pool_gpus += count_gpus(p->gpus);
	return 0;
}

int caps_gpus_held(struct db *db, int64_t user_id, struct caps_held *out)
{
	struct held_walk w = {user_id, out};

	memset(out, 0, sizeof(*out));
	if (runtimes_each_live(db, held_runtime, &w) < 0 || pools_each_live(db, held_pool, &w) < 0 ||
	    (out->preemptible_gpus = jobs_preemptible_gpus_of(db, user_id)) < 0)
		return -EIO;
	return 0;
}

bool caps_gpus_fit(int held, int want, unsigned cap)
{
	return held <= 0 || (int64_t)held + want <= (int64_t)cap;
}
