/* gpuqueue.c - GPU starts and the queue's moves: enqueue, expire, start the
 * first runtime of the fair order (sched/queue.h) on a free GPU when it is
 * its turn, keep every place current. The order and the estimates are sched/'s; this file acts.
 *
 * Locking: the pool's allocation lock (gpus_alloc_lock) is held while a GPU
 * is chosen and a row moved onto it, and while places are written, never
 * over a backend call (the backend's event thread may need the lock while a
 * caller waits for the backend's reply). */
#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "config/config.h"
#include "labd/app.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "labd/ticker.h"
#include "metrics/labd.h"
#include "runtime/gpuqueue.h"
#include "runtime/moves.h"
#include "runtime/poke.h"
#include "runtime/reconcile.h"
#include "sched/caps.h"
#include "sched/gpus.h"
#include "sched/queue.h"
#include "store/db.h"
#include "store/gpu_queue.h"
#include "store/plans.h"

/* Entries looked at per pass; more wait for a later pass (in arrival order). */
#define QUEUE_PASS_MAX 256

/* The queue of one pass and whom it excuses, read under the allocation lock. */
struct pass {
	struct queue_item items[QUEUE_PASS_MAX];
	int64_t excused[QUEUE_PASS_MAX];
	int n, n_excused;
	const struct queue_item *runtime; /* the one whose turn was read */
};
#define EXCUSED_UNREAD (-2) /* n_excused before the excused users are read */

/* Whether the queued runtime it may take a device of its kind now: one is
 * free (the first into *id) and it is its turn among the entries waiting for
 * that kind. 1, 0, or -EIO. */
static int may_start(struct app *app, struct pass *p, const struct queue_item *it, unsigned *id)
{
	static unsigned ids[QUEUE_PASS_MAX]; /* under the allocation lock */
	int free_n = gpus_pick_free_kind(app->db, app->gpus, app->cfg,
					 it->kind[0] ? it->kind : "whole", QUEUE_PASS_MAX, ids);

	if (free_n <= 0)
		return free_n < 0 ? -EIO : 0;
	*id = ids[0];
	if (p->n_excused == EXCUSED_UNREAD) /* read once a device is free: a pass costs little */
		p->n_excused = queue_excused(app->db, app->cfg, p->items, (size_t)p->n,
					     p->excused, QUEUE_PASS_MAX);
	if (p->n_excused < 0)
		return -EIO;
	return queue_runtime_turn(p->items, (size_t)p->n, it->runtime_id, (unsigned)free_n,
				  p->excused, (size_t)p->n_excused);
}

/* Whether a runtime before items[i] in the order waits for the same kind of
 * device: it was asked first, and what held it holds items[i] too (no device
 * of the kind free, or entries ahead that the free ones cannot all serve). */
static bool kind_tried(const struct pass *p, int i)
{
	for (int k = 0; k < i; k++)
		if (p->items[k].runtime_id && queue_is_kind(&p->items[k], p->items[i].kind))
			return true;
	return false;
}

/* Under the allocation lock: whether the queued runtime runtime_id (0: the
 * first in the order that may; p->runtime its entry) may take a device now
 * (1, its id in *id): a free device of its kind, its turn in the fair order of
 * runtimes and GPU jobs waiting for that kind (a GPU job ahead of it waits for
 * devices it must not take, docs/api.md "GPUs and the queue"), and room under
 * the host's cap. 0 when not, or -EIO. */
static int runtime_turn(struct app *app, int64_t now, int64_t runtime_id, struct pass *p,
			unsigned *id)
{
	int rc = 0, live;
	unsigned cap;

	p->runtime = NULL;
	p->n = queue_load(app->db, now, p->items, QUEUE_PASS_MAX);
	if (p->n < 0)
		return -EIO;
	queue_order(p->items, (size_t)p->n);
	p->n_excused = EXCUSED_UNREAD;
	for (int i = 0; i < p->n && rc == 0; i++) {
		const struct queue_item *it = &p->items[i];
		if (!it->runtime_id || (runtime_id && it->runtime_id != runtime_id) ||
		    (!runtime_id && kind_tried(p, i)))
			continue; /* the first runtime of a kind that may not go: nor may the rest */
		rc = may_start(app, p, it, id);
		if (rc == 1)
			p->runtime = it;
	}
	if (rc <= 0)
		return rc;
	/* a start the host cap holds (preemptible pools fill it: jobs/preempt.c
	 * frees one) waits here, not in the supervisor's refusal */
	if (!caps_host_has_room(app->db, app->cfg, &live, &cap))
		return live < 0 ? -EIO : 0;
	return 1;
}

/* Under the allocation lock: a queued row for the start, moved onto a free
 * GPU at once when it is its turn (1, *out), else left queued (0, *out);
 * DB_CONFLICT or -EIO. */
static int start_or_queue(struct app *app, int64_t user_id, const char *token, const char *kind,
			  int64_t now, int64_t length_s, struct runtime *out)
{
	static struct pass p; /* under the allocation lock */
	char gpus[16];
	unsigned id;
	int rc = gpu_queue_add(app->db, user_id, token, kind, now, length_s,
			       now + app->cfg->gpu_queue_max_wait_s, out);

	if (rc != 0)
		return rc == DB_CONFLICT ? DB_CONFLICT : -EIO;
	rc = runtime_turn(app, now, out->id, &p, &id);
	if (rc <= 0)
		return rc;
	snprintf(gpus, sizeof(gpus), "%u", id);
	rc = gpu_queue_take(app->db, out->id, gpus, gpus_fraction_milli(app->gpus, app->cfg, id),
			    now, now + length_s);
	if (rc < 0)
		return -EIO;
	return runtimes_latest(app->db, user_id, out) == 1 ? rc : -EIO;
}

int gpuqueue_start(struct app *app, int64_t user_id, const char *user, const char *address,
		   const char *token, const struct runtime_resources *res, struct runtime *out)
{
	int64_t now = time(NULL);
	int rc;

	char kind[PLAN_GPU_MAX];

	if (app->cfg->n_gpu_devices == 0)
		return -ENODEV;
	/* the kind of device the user's plan gives, fixed as it queues */
	if (plans_user_gpu(app->db, user_id, kind, sizeof(kind)) < 0)
		return -EIO;
	/* a kind the lab has no device of would wait for nothing: refused */
	if (gpus_count_kind(app->gpus, app->cfg, kind) == 0)
		return -ENXIO;
	gpus_alloc_lock(app->gpus);
	rc = start_or_queue(app, user_id, token, kind, now, res->deadline_s - now, out);
	gpus_alloc_unlock(app->gpus);
	if (rc == DB_CONFLICT)
		return -EEXIST;
	if (rc < 0)
		return -EIO;
	reconcile_own_runtime(out->id);
	runtime_audit(app, now, user, "runtime.start", user, address, rc == 1 ? "gpu" : "gpu (queued)");
	if (rc == 1) {
		runtime_moved(app, user_id);
		runtime_ask_backend(app, out, res);
	} else {
		log_info("runtime of %s queued for a GPU", user);
		runtime_queue_replan(app); /* its place is in the answer; notifies */
		reconcile_poke(app);
	}
	return runtimes_latest(app->db, user_id, out) == 1 ? 0 : -EIO;
}

/* "30 min", "2 h", "45 s": how long the queue lets a start wait. */
static void say_duration(int64_t s, char *out, size_t len)
{
	if (s % 3600 == 0)
		snprintf(out, len, "%lld h", (long long)(s / 3600));
	else if (s % 60 == 0)
		snprintf(out, len, "%lld min", (long long)(s / 60));
	else
		snprintf(out, len, "%lld s", (long long)s);
}

static void expire(struct app *app, const struct queue_item *it)
{
	char reason[RUNTIME_REASON_MAX], wait[32];
	struct runtime r;

	if (runtimes_latest(app->db, it->user_id, &r) != 1 || r.id != it->runtime_id ||
	    r.state != RUNTIME_QUEUED)
		return;
	say_duration(app->cfg->gpu_queue_max_wait_s, wait, sizeof(wait));
	snprintf(reason, sizeof(reason),
		 "waited too long for a GPU: none became free within %s ([gpu] queue_max_wait)",
		 wait);
	runtime_end(app, &r, true, reason);
}

/* Under the allocation lock: moves the first runtime of the fair order onto
 * a free GPU when it is its turn (the GPU jobs ahead of it are jobs/'s to
 * start), with the deadline *res gives. 1 with *r (the starting row, with
 * its queue times) and *res (*limits_ok false when the user's limits could
 * not be read: the row then gets the shortest length and is failed), 0 when
 * no runtime may start, or -EIO. */
static int take_head(struct app *app, int64_t now, struct runtime *r,
		     struct runtime_resources *res, bool *limits_ok)
{
	static struct pass p; /* under the allocation lock */
	const struct queue_item *head;
	char gpus[16];
	unsigned id;
	int rc = runtime_turn(app, now, 0, &p, &id);

	if (rc <= 0)
		return rc;
	head = p.runtime;
	snprintf(gpus, sizeof(gpus), "%u", id);
	*limits_ok = runtime_resources_read(app, head->user_id, RUNTIME_GPU, now, res) == 0;
	if (!*limits_ok)
		res->deadline_s = now + QUOTA_MIN_START_S;
	rc = gpu_queue_take(app->db, head->runtime_id, gpus,
			    gpus_fraction_milli(app->gpus, app->cfg, id), now, res->deadline_s);
	if (rc <= 0 || runtimes_latest(app->db, head->user_id, r) != 1)
		return rc < 0 ? rc : 0;
	r->queued_at = head->queued_at;
	r->queue_expires_at = head->expires_at;
	return 1;
}

static void dispatch(struct app *app, int64_t now)
{
	struct runtime r;
	struct runtime_resources res;
	bool limits_ok;
	char detail[RUNTIME_GPUS_MAX + 64];

	for (unsigned started = 0; started < GPUS_DEVICES_MAX; started++) {
		gpus_alloc_lock(app->gpus);
		int rc = take_head(app, now, &r, &res, &limits_ok);
		gpus_alloc_unlock(app->gpus);
		if (rc <= 0)
			return;
		metrics_gpu_queue_wait(now - r.queued_at);
		runtime_moved(app, r.user_id);
		snprintf(detail, sizeof(detail), "gpu %s after %lld s in the queue", r.gpus,
			 (long long)(now - r.queued_at));
		runtime_audit(app, now, NULL, "runtime.dequeue", r.user_name, NULL, detail);
		log_info("runtime of %s leaves the queue: %s", r.user_name, detail);
		if (limits_ok)
			runtime_ask_backend(app, &r, &res);
		else
			runtime_end(app, &r, true, "could not start: the user's limits could not be read");
	}
}

/* While anyone waits the pass comes back this often. */
#define QUEUE_RECHECK_MS 1000

long long gpuqueue_tick(struct app *app)
{
	struct queue_item items[QUEUE_PASS_MAX];
	int64_t now = time(NULL);
	int n = queue_load(app->db, now, items, QUEUE_PASS_MAX);

	if (n == 0)
		return TICKER_IDLE;
	for (int i = 0; i < n; i++)
		if (items[i].runtime_id && items[i].expires_at <= now)
			expire(app, &items[i]);
	dispatch(app, now);
	runtime_queue_replan(app);
	return clock_ms() + QUEUE_RECHECK_MS;
}
