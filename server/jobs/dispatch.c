/* dispatch.c - waiting jobs onto pools: a matching warm pool (Starting is
 * skipped), else a new pool once the user's pool cap and, for GPU jobs, the
 * fair order and free GPUs allow; and max_wait_s. See dispatch.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "backend/backend.h"
#include "jobs/dispatch.h"
#include "jobs/hosts.h"
#include "jobs/live.h"
#include "jobs/moves.h"
#include "jobs/preempt.h"
#include "jobs/reconcile.h"
#include "jobs/spec.h"
#include "labd/app.h"
#include "labd/clock.h"
#include "labd/fault.h"
#include "labd/log.h"
#include "sched/caps.h"
#include "sched/gpus.h"
#include "sched/queue.h"
#include "sched/quota_check.h"
#include "store/db.h"

/* The ids of the live set's rows that want says, in its order (oldest first). */
struct ids {
	int64_t id[JOBS_LIVE_MAX];
	int n;
};

static void select_rows(const struct jobs_live *live, bool (*want)(const struct jobs_live_row *r),
			struct ids *ids)
{
	ids->n = 0;
	for (size_t i = 0; i < live->n; i++)
		if (want(&live->row[i]))
			ids->id[ids->n++] = live->row[i].id;
}

/* As waiting() below, on the pass's read of the row. */
static bool waiting_row(const struct jobs_live_row *r)
{
	return r->status == JOB_IN_PROGRESS &&
	       (r->secondary == JOB_PENDING || (r->secondary == JOB_STARTING && r->pool_id == 0));
}

/* Pending, or Starting again without a pool (a retry). */
static bool waiting(const struct job *j)
{
	return j->status == JOB_IN_PROGRESS &&
	       (j->secondary == JOB_PENDING || (j->secondary == JOB_STARTING && j->pool_id == 0));
}

/* The job's sandbox size, without GPUs (the pool row's minors are added to it). */
static struct box_shape job_size(const struct job *j)
{
	return (struct box_shape){.memory_bytes = j->memory_bytes, .cpus_milli = j->cpus_milli,
				  .network = j->network, .image = j->image};
}

static struct pool_shape shape_of(const struct job *j)
{
	return (struct pool_shape){.user_id = j->user_id, .gpu = j->gpu,
				   .gpu_count = j->gpu_count, .gpu_kind = j->gpu_kind,
				   .size = job_size(j)};
}

#define WAITING_MASK ((1u << JOB_PENDING) | (1u << JOB_STARTING))

/* The warm pool p becomes the job's: Downloading at once. True when taken. */
static bool take_warm(struct app *app, const struct job *j, const struct pool *p, int64_t now)
{
	char message[160];
	struct job_move m = {.status = JOB_IN_PROGRESS, .secondary = JOB_DOWNLOADING,
			     .at_ms = clock_wall_ms(), .pool_id = p->id, .reused_pool = true,
			     .from_mask = WAITING_MASK, .message = message};

	if (pools_take(app->db, p->id, j->id, now) != 1)
		return false;
	snprintf(message, sizeof(message), "reusing warm pool %lld kept by job %lld; Starting skipped",
		 (long long)p->id, (long long)p->last_job_id);
	if (jobs_move(app->db, j->id, &m) != 1) {
		/* stopped meanwhile: the pool was taken for nothing; it goes */
		pools_end(app->db, p->id, "its next job was stopped as it took the pool", now);
		jobs_end_warm(app, p->last_job_id, "its next job was stopped as it took the pool",
			      now);
		backend_pool_stop(app->backend, p->user_name, p->id, "not needed");
		return true;
	}
	if (p->last_job_id) {
		jobs_set_warm(app->db, p->last_job_id, "Reused", 0, now, 0, message, j->id);
		jobs_changed(app, p->last_job_id);
	}
	jobs_changed(app, j->id);
	log_info("job %lld of %s reuses warm pool %lld", (long long)j->id, j->user_name,
		 (long long)p->id);
	return true;
}

struct warm_list {
	struct pool p[16];
	int n;
};

static int collect_warm(const struct pool *p, void *ctx)
{
	struct warm_list *w = ctx;

	if (p->state == POOL_AVAILABLE && w->n < 16)
		w->p[w->n++] = *p;
	return 0;
}

/* A job that matches none of its user's warm pools releases them
 * (docs/jobs.md "Warm pools"): their sandboxes and GPUs are not held for a
 * shape nobody asks for. */
static void release_unmatched(struct app *app, const struct job *j)
{
	struct warm_list w = {.n = 0};
	char reason[120];

	if (pools_each_warm(app->db, j->user_id, collect_warm, &w) < 0)
		return;
	snprintf(reason, sizeof(reason), "released: job %lld did not match it", (long long)j->id);
	for (int i = 0; i < w.n; i++)
		jobs_release_pool(app, &w.p[i], reason);
}

/* The users whose waiting GPU jobs cannot start in this pass for a reason of
 * their own (their pool cap, [quota] gpus_held): they take no GPU now, so
 * they hold nobody behind them in the fair order. */
struct excused {
	int64_t user_id[QUEUE_TURN_MAX];
	size_t n;
};

/* How many of items[0..n) wait for devices of kind. */
static int waiting_of_kind(const struct queue_item *items, int n, const char *kind)
{
	int k = 0;

	for (int i = 0; i < n; i++)
		k += queue_is_kind(&items[i], kind);
	return k;
}

_Static_assert(RUNTIME_GPUS_MAX >= BOX_GPUS_MAX * 7 + 1,
	       "a pool row's text holds a sandbox's most device ids of 6 digits each");

/* ids[0..n) as the "a,b" text of a pool row into out (len bytes). */
static void ids_text(const unsigned *ids, int n, char *out, size_t len)
{
	size_t used = 0;

	out[0] = '\0';
	for (int i = 0; i < n && used < len; i++) {
		int w = snprintf(out + used, len - used, "%s%u", i ? "," : "", ids[i]);
		if (w < 0)
			break;
		used += (size_t)w;
	}
}

/* Whether a GPU job may take its devices now: the fair order of GPU runtimes
 * and jobs waiting for its kind of device (sched/queue.h), and enough of that
 * kind free; then the ids into gpus and the fraction of a card each is into
 * *fraction_milli. Caller holds the GPU lock. */
static bool gpu_turn(struct app *app, const struct job *j, int64_t now,
		     const struct excused *ex, char *gpus, size_t len, unsigned *fraction_milli)
{
	static struct queue_item items[QUEUE_TURN_MAX]; /* the jobs ticker's thread only */
	static unsigned ids[QUEUE_TURN_MAX];		/* the same */
	int free_n = gpus_pick_free_kind(app->db, app->gpus, app->cfg, j->gpu_kind,
					 QUEUE_TURN_MAX, ids),
	    n;

	if (free_n < j->gpu_count)
		return false; /* not enough free whatever the order: the order is not read */
	/* read again at each start: the jobs started before weigh in it (reweighed) */
	n = queue_load(app->db, now, items, QUEUE_TURN_MAX);
	if (n < 0)
		return false;
	queue_order(items, (size_t)n);
	/* a preemptible job is not in the queue: it takes devices nobody waits for */
	if (j->preemptible ? waiting_of_kind(items, n, j->gpu_kind) > 0
			   : !queue_job_turn(items, (size_t)n, j->id, (unsigned)free_n, ex->user_id,
					     ex->n))
		return false;
	ids_text(ids, j->gpu_count, gpus, len);
	*fraction_milli = gpus_fraction_milli(app->gpus, app->cfg, ids[0]);
	return true;
}

/* The pool's hard end: the job's whole run, its grace and the longest
 * keep-alive, with slack for staging and upload (contract §1). */
static int64_t pool_deadline(const struct app *app, const struct job *j, int64_t now)
{
	return now + j->max_runtime_s + j->grace_s + app->cfg->jobs_keep_alive_max_s +
	       JOBS_DEADLINE_SLACK_S;
}

/* A failure of the pool start in words. */
static void start_failure(int rc, const char *err, char *out, size_t len)
{
	if (rc == -ENOSYS)
		snprintf(out, len, "this labd's backend runs no training jobs");
	else if (strncmp(err, "image_missing", 13) == 0)
		snprintf(out, len, "image missing: %.300s", err[13] == ':' ? err + 14 : err);
	else
		snprintf(out, len, "could not start: %.300s", err[0] ? err : strerror(-rc));
}

static void fail_job(struct app *app, int64_t job_id, enum job_secondary s, const char *reason)
{
	struct job_move m = {.status = JOB_FAILED, .secondary = s, .at_ms = clock_wall_ms(),
			     .message = reason, .failure = reason};

	if (jobs_move(app->db, job_id, &m) == 1) {
		log_info("job %lld failed: %s", (long long)job_id, reason);
		jobs_changed(app, job_id);
	}
}

static void ask_backend(struct app *app, const struct job *j, struct pool *p)
{
	struct backend_pool_start s = {
		.user = j->user_name, .user_id = j->user_id, .pool_id = p->id,
		.deadline_s = p->deadline, .shape = job_size(j),
		.instances = jobs_instance_count(j)};
	char err[200] = "", reason[JOB_REASON_MAX], copy[RUNTIME_GPUS_MAX], *save = NULL;
	int rc;

	static struct gpu_info devs[BOX_GPUS_MAX]; /* the jobs ticker's thread only */

	snprintf(copy, sizeof(copy), "%s", p->gpus);
	for (char *t = strtok_r(copy, ",", &save); t && s.shape.n_gpus < BOX_GPUS_MAX;
	     t = strtok_r(NULL, ",", &save)) {
		unsigned id = (unsigned)strtoul(t, NULL, 10);
		/* a MIG instance is named to CUDA by its uuid (docs/sandbox.md "GPUs") */
		if (app->gpus && gpus_find(app->gpus, id, &devs[s.shape.n_gpus]) &&
		    devs[s.shape.n_gpus].uuid[0])
			s.gpu_uuids[s.shape.n_gpus] = devs[s.shape.n_gpus].uuid;
		s.shape.gpus[s.shape.n_gpus++] = id;
	}
	FAULT_POINT("job.dispatch");
	rc = backend_pool_start(app->backend, &s, err, sizeof(err));
	if (rc == 0 || rc == -ETIMEDOUT) /* a timeout: the list will tell (reconcile.c) */
		return;
	if (rc == -EBUSY) { /* a teardown (a GPU, a pool of the user's) has not finished:
			     * try again next pass */
		pools_end(app->db, p->id, "the host still tore down an earlier sandbox", time(NULL));
		jobs_set_pool(app->db, j->id, 0);
		return;
	}
	start_failure(rc, err, reason, sizeof(reason));
	pools_end(app->db, p->id, reason, time(NULL));
	fail_job(app, j->id, JOB_S_FAILED, reason);
}

/* What a dispatch of one waiting job came to. */
enum dispatched {
	DISPATCH_DONE,      /* started, or ended */
	DISPATCH_TO_FILL,   /* a GPU job no warm pool took: fill_gpus starts it */
	DISPATCH_HELD_USER, /* waits for its user's own pools or GPUs to end */
	DISPATCH_HELD_HOST, /* waits for free GPUs, its turn, or the host's sandbox cap */
};

/* A new pool for the job: Starting, then the backend builds it. */
static enum dispatched start_cold(struct app *app, const struct job *j, int64_t now,
				  const struct excused *ex)
{
	struct pool_shape shape = shape_of(j);
	struct pool p;
	char gpus[RUNTIME_GPUS_MAX] = "";
	struct job_move m = {.status = JOB_IN_PROGRESS, .secondary = JOB_STARTING,
			     .at_ms = clock_wall_ms(), .from_mask = WAITING_MASK,
			     .message = "building the job's sandbox"};
	int rc;

	gpus_alloc_lock(app->gpus);
	if (j->gpu && !gpu_turn(app, j, now, ex, gpus, sizeof(gpus), &shape.gpu_fraction_milli)) {
		gpus_alloc_unlock(app->gpus);
		return DISPATCH_HELD_HOST; /* waits in the fair order */
	}
	rc = pools_create(app->db, &shape, gpus, j->id, now, pool_deadline(app, j, now), &p);
	gpus_alloc_unlock(app->gpus);
	if (rc < 0)
		return DISPATCH_HELD_HOST; /* the store: the next pass tries again */
	jobs_reconcile_own_pool(p.id);
	m.pool_id = p.id;
	/* a retry is in Starting already: its transition says why; only the pool is new */
	if ((j->secondary == JOB_STARTING ? jobs_set_pool(app->db, j->id, p.id)
					  : jobs_move(app->db, j->id, &m)) != 1) {
		pools_end(app->db, p.id, "its job ended before it was built", now);
		return DISPATCH_DONE;
	}
	jobs_changed(app, j->id);
	ask_backend(app, j, &p);
	return DISPATCH_DONE;
}

/* A retry is a new start: it may train only what is left of max_runtime_s
 * (summed over attempts), and it passes the submit's quota check again (the
 * windows of its kind, where every attempt's ledger entry counts). A job
 * with neither left ends here, not on a new pool (docs/jobs.md "Restarts
 * and retries").
 * False when the job may not start now. */
static bool retry_allowed(struct app *app, const struct job *j, int64_t now)
{
	struct quota_status st;
	struct quota_window w = {0};
	int64_t deadline;
	char reason[JOB_REASON_MAX];
	const char *refused = "labd lost the job's sandbox and its retry is refused";
	int rc;

	if (jobs_runtime_left_s(j) <= 0) { /* training time counts across attempts */
		snprintf(reason, sizeof(reason),
			 "labd lost the job's sandbox after it trained its whole max_runtime_s "
			 "of %lld s: no retry",
			 (long long)j->max_runtime_s);
		struct job_move m = {.status = JOB_STOPPED, .secondary = JOB_MAX_RUNTIME_EXCEEDED,
				     .at_ms = clock_wall_ms(), .message = reason};
		if (jobs_move(app->db, j->id, &m) == 1)
			jobs_changed(app, j->id);
		return false;
	}
	rc = quota_status_read(app->db, app->cfg, j->user_id, now, &st);
	if (rc == -E2BIG)
		snprintf(reason, sizeof(reason),
			 "%s: the usage ledger holds more of your entries than a quota check reads",
			 refused);
	else if (rc < 0)
		return false; /* the store: the next pass asks again */
	else
		switch (quota_check_start(&st, j->gpu ? RUNTIME_GPU : RUNTIME_CPU, &deadline, &w)) {
		case QUOTA_START_ALLOWED:
			return true;
		case QUOTA_START_NO_GPUS:
			snprintf(reason, sizeof(reason), "%s: your plan allows no GPUs now", refused);
			break;
		case QUOTA_START_EXCEEDED:
			snprintf(reason, sizeof(reason),
				 "%s: your %s quota window is used up (%lld of %lld s)", refused,
				 quota_limit_name(w.limit), (long long)w.used_s,
				 (long long)w.limit_s);
			break;
		}
	fail_job(app, j->id, JOB_INTERRUPTED, reason);
	return false;
}

/* The capacity caps (docs/operations.md "Capacity"): the host's cap on live
 * sandboxes, and for a GPU job the GPUs its user holds elsewhere (runtime, pools,
 * warm pools; its unmatched warm pools were released just before) against [quota]
 * gpus_held. A job beyond either waits in Pending, its message saying which.
 * DISPATCH_DONE when neither binds (nothing started yet). */
static enum dispatched caps_allow(struct app *app, const struct job *j)
{
	char message[JOB_REASON_MAX] = "";
	enum dispatched held_by = DISPATCH_HELD_HOST;
	struct caps_held h;
	unsigned cap;
	int live, held;

	if (!caps_host_has_room(app->db, app->cfg, &live, &cap)) {
		if (live >= 0)
			snprintf(message, sizeof(message),
				 "waits: the host runs its cap of %u sandboxes ([runtime] "
				 "max_sandboxes)", cap);
	} else if (j->gpu && caps_gpus_held(app->db, j->user_id, &h) == 0) {
		held = h.runtime_gpus + h.pool_gpus + h.warm_gpus;
		if (caps_gpus_fit(held, j->gpu_count, app->cfg->quota_gpus_held))
			return DISPATCH_DONE;
		held_by = DISPATCH_HELD_USER;
		snprintf(message, sizeof(message),
			 "waits: you hold %d GPU%s (runtime %d, jobs %d, warm pools %d) and may "
			 "hold %u at once ([quota] gpus_held)",
			 held, held == 1 ? "" : "s", h.runtime_gpus, h.pool_gpus, h.warm_gpus,
			 app->cfg->quota_gpus_held);
	} else if (!j->gpu)
		return DISPATCH_DONE;
	if (message[0] && jobs_set_wait_message(app->db, j->id, message) == 1)
		jobs_changed(app, j->id);
	return held_by;
}

/* One waiting job: a matching warm pool, else (for a GPU job only when cold
 * is set: fill_gpus, in the fair order) a new pool within the caps. */
static enum dispatched dispatch_one(struct app *app, const struct job *j, int64_t now,
				    bool cold, const struct excused *ex)
{
	struct pool_shape shape = shape_of(j);
	struct pool p;
	int64_t need_until = now + j->max_runtime_s + j->grace_s + JOBS_DEADLINE_SLACK_S;
	enum dispatched caps;
	int live;

	if (j->attempt > 1 && !retry_allowed(app, j, now))
		return DISPATCH_DONE; /* ended, or waits on the store */
	if (!jobs_preempt_may_start(app, j))
		return DISPATCH_DONE; /* a preemptible job holds back nobody */
	/* a job on several hosts takes no warm pool: a pool is one host's sandbox */
	if (jobs_instance_count(j) == 1 &&
	    pools_find_available(app->db, &shape, need_until, now, &p) == 1 &&
	    take_warm(app, j, &p, now))
		return DISPATCH_DONE;
	release_unmatched(app, j);
	if (j->gpu && !cold && !j->preemptible) /* a preemptible one is not in the order */
		return DISPATCH_TO_FILL;
	live = pools_count_live(app->db, j->user_id);
	if (live < 0 || (unsigned)live >= app->cfg->jobs_max_pools_per_user)
		return DISPATCH_HELD_USER; /* waits for one of the user's pools to end */
	caps = caps_allow(app, j);
	if (caps != DISPATCH_DONE)
		return caps;
	return start_cold(app, j, now, ex);
}

/* The users (and kind) whose job still waits after this pass looked at it
 * (no warm pool took it, its user's own caps hold it): their later jobs of
 * that kind wait too, unread (a user's first job released the warm pools it
 * did not match). With a thousand jobs queued a pass then costs a few
 * queries per user, not per job. */
struct held_back {
	int64_t user_id[JOBS_LIVE_MAX];
	bool gpu[JOBS_LIVE_MAX];
	int n;
};

static bool is_held_back(const struct held_back *h, const struct job *j)
{
	for (int i = 0; i < h->n; i++)
		if (h->user_id[i] == j->user_id && h->gpu[i] == j->gpu)
			return true;
	return false;
}

/* The first waiting job of kind in the fair order whose user is not excused,
 * or 0. */
static int64_t head_job(const struct queue_item *items, size_t n, const struct excused *ex,
			const char *kind)
{
	for (size_t i = 0; i < n; i++)
		if (items[i].job_id && queue_is_kind(&items[i], kind) &&
		    !queue_listed(ex->user_id, ex->n, items[i].user_id))
			return items[i].job_id;
	return 0;
}

/* The jobs ticker's thread only: the queue read by the fill, and whom it excuses. */
static struct queue_item fill_items[QUEUE_TURN_MAX];
static struct excused fill_ex;

/* New pools for GPU jobs waiting for devices of kind, always the head of
 * that kind's fair order first (read again after each start, which weighs in
 * it), while devices of the kind are free. A head its own user's caps hold
 * back is passed over (its user excused for this pass); a head that waits
 * for devices or its turn (a runtime ahead) holds everyone of its kind behind
 * it: the order is strict, and each kind's is its own. */
static void fill_kind(struct app *app, const char *kind)
{
	enum dispatched d = DISPATCH_DONE;
	unsigned id_free;
	struct job j;
	int64_t now;
	int n;

	while (d != DISPATCH_HELD_HOST && fill_ex.n < QUEUE_TURN_MAX &&
	       gpus_pick_free_kind(app->db, app->gpus, app->cfg, kind, 1, &id_free) > 0) {
		/* the clock now, not the pass's start: the starts of this second
		 * (ledger entries begun at now) must weigh in the order */
		now = time(NULL);
		n = queue_load(app->db, now, fill_items, QUEUE_TURN_MAX);
		if (n <= 0)
			return;
		queue_order(fill_items, (size_t)n);
		int64_t id = head_job(fill_items, (size_t)n, &fill_ex, kind);
		if (!id || jobs_find(app->db, id, &j) != 1)
			return;
		d = waiting(&j) ? dispatch_one(app, &j, now, true, &fill_ex) : DISPATCH_HELD_HOST;
		if (d == DISPATCH_HELD_USER)
			fill_ex.user_id[fill_ex.n++] = j.user_id;
		jobs_row_free(&j);
	}
}

/* Each kind of device some job waits for gets its own fill. */
static void fill_gpus(struct app *app)
{
	char kinds[QUEUE_TURN_MAX][QUEUE_KIND_MAX];
	int n = queue_load(app->db, time(NULL), fill_items, QUEUE_TURN_MAX), n_kinds = 0;

	fill_ex.n = 0;
	for (int i = 0; i < n; i++) {
		const char *kind = fill_items[i].kind[0] ? fill_items[i].kind : "whole";
		bool seen = false;
		for (int k = 0; k < n_kinds && !seen; k++)
			seen = strcmp(kinds[k], kind) == 0;
		if (!seen && fill_items[i].job_id)
			snprintf(kinds[n_kinds++], QUEUE_KIND_MAX, "%s", kind);
	}
	for (int k = 0; k < n_kinds; k++)
		fill_kind(app, kinds[k]);
}

void jobs_dispatch(struct app *app, const struct jobs_live *live)
{
	static struct ids ids;        /* the jobs ticker's thread only */
	static struct held_back held; /* the same */
	static const struct excused none;
	struct job j;

	select_rows(live, waiting_row, &ids);
	held.n = 0;
	for (int i = 0; i < ids.n; i++) {
		if (jobs_find(app->db, ids.id[i], &j) != 1)
			continue;
		/* the clock now, not the pass's start: a pool released without a
		 * keep-alive (available until its end's second) is no warm pool;
		 * a preemptible job that waits holds back none of its user's jobs */
		if (waiting(&j) && !is_held_back(&held, &j) &&
		    dispatch_one(app, &j, time(NULL), false, &none) != DISPATCH_DONE &&
		    !j.preemptible) {
			held.user_id[held.n] = j.user_id;
			held.gpu[held.n++] = j.gpu;
		}
		jobs_row_free(&j);
	}
	fill_gpus(app);
}

static bool pending(const struct job *j)
{
	return j->status == JOB_IN_PROGRESS && j->secondary == JOB_PENDING;
}

void jobs_expire_waits(struct app *app)
{
	static struct ids ids; /* the jobs ticker's thread only */
	int64_t now = time(NULL);
	char reason[200];
	struct job j;

	/* read from the store, not the pass's live set: a job far down a long
	 * queue is past its max_wait_s as surely as one at its head */
	ids.n = jobs_overdue_pending(app->db, now, ids.id, JOBS_LIVE_MAX);
	for (int i = 0; i < ids.n; i++) {
		if (jobs_find(app->db, ids.id[i], &j) != 1)
			continue;
		if (pending(&j) && now - j.created_at > j.max_wait_s) {
			snprintf(reason, sizeof(reason),
				 "waited longer than its max_wait_s of %lld s for %s",
				 (long long)j.max_wait_s,
				 j.gpu ? "free GPUs or a free pool" : "a free pool");
			struct job_move m = {.status = JOB_STOPPED,
					     .secondary = JOB_MAX_WAIT_EXCEEDED,
					     .at_ms = clock_wall_ms(), .message = reason,
					     .failure = reason, .from_mask = 1u << JOB_PENDING};
			if (jobs_move(app->db, j.id, &m) == 1)
				jobs_changed(app, j.id);
		}
		jobs_row_free(&j);
	}
}
