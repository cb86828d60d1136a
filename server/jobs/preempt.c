/* preempt.c - preemptible jobs stopped for whoever waits, and put back in
 * the queue when their run ends; see preempt.h. */
#include "jobs/preempt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "config/capacity.h"
#include "config/config.h"
#include "jobs/moves.h"
#include "jobs/poke.h"
#include "labd/app.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "sched/caps.h"
#include "sched/gpus.h"
#include "sched/queue.h"
#include "store/gpu_queue.h"
#include "store/pools.h"
#include "store/users.h"

#define VICTIMS_MAX 64
/* GPU queue entries looked at per pass (as dispatch's fair turn). */
#define QUEUE_LOOK_MAX 64
/* On-demand jobs whose caps are looked at per pass. */
#define WAITERS_MAX 16
/* An overdue preemption's kill is asked again at most this often. */
#define OVERDUE_EVERY_MS 5000

struct victims {
	struct job_on_pool v[VICTIMS_MAX];
	int n;
};

static int collect(const struct job_on_pool *v, void *ctx)
{
	struct victims *vs = ctx;

	if (vs->n == VICTIMS_MAX)
		return 1;
	vs->v[vs->n++] = *v;
	return 0;
}

/* Begins v's preemption for waiting: the stop path of a user's stop, with
 * the job's grace (its command not run yet: its pool goes, nothing to save).
 * True when begun. */
static bool preempt(struct app *app, struct job_on_pool *v, const char *waiting)
{
	int64_t at_ms = clock_wall_ms();
	int rc;

	if (jobs_preempt_begin(app->db, v->id, waiting, at_ms) != 1)
		return false;
	v->preempting = true;
	v->preempt_at_ms = at_ms;
	log_info("job %lld of %s preempted for %s (grace %lld s)", (long long)v->id, v->user_name,
		 waiting, (long long)v->grace_s);
	jobs_changed(app, v->id);
	rc = v->run_sent ? backend_job_stop(app->backend, v->user_name, v->pool_id, v->id,
					    v->grace_s)
			 : backend_pool_stop(app->backend, v->user_name, v->pool_id, "preempted");
	if (rc == -ENOENT)
		jobs_wake(app); /* its sandbox is gone already: the reconciliation ends it */
	else if (rc < 0)
		log_warn("job %lld: the preemption's stop was not taken (%d); it is killed once "
			 "overdue", (long long)v->id, rc);
	return true;
}

/* A stop lost (labd-web died between the row and the message) or ignored:
 * past the grace and the slack the pool is killed. */
static void kill_overdue(struct app *app, const struct victims *vs)
{
	static int64_t last_ms; /* the jobs ticker's thread only */
	int64_t now_ms = clock_wall_ms();

	if (now_ms - last_ms < OVERDUE_EVERY_MS)
		return;
	for (int i = 0; i < vs->n; i++) {
		const struct job_on_pool *v = &vs->v[i];
		if (!v->preempting || now_ms - v->preempt_at_ms <= (v->grace_s + PREEMPT_SLACK_S) * 1000)
			continue;
		last_ms = now_ms;
		log_warn("job %lld of %s: its preemption is overdue; its pool is killed",
			 (long long)v->id, v->user_name);
		if (backend_pool_stop(app->backend, v->user_name, v->pool_id,
				      "preempted: its stop took longer than its grace") == -ENOENT)
			jobs_wake(app);
	}
}

static void user_name(struct app *app, int64_t id, char *out, size_t len)
{
	struct user u;

	if (users_find_by_id(app->db, id, &u) == 1)
		snprintf(out, len, "%s", u.name);
	else
		snprintf(out, len, "user %lld", (long long)id);
}

/* What waits, in words: the head of the GPU queue (and how many more). */
static void say_gpu_waiting(struct app *app, const struct queue_item *items, int n, char *out,
			    size_t len)
{
	char name[40], more[40] = "";

	user_name(app, items[0].user_id, name, sizeof(name));
	if (n > 1)
		snprintf(more, sizeof(more), " (and %d more waiting for GPUs)", n - 1);
	if (items[0].job_id)
		snprintf(out, len, "on-demand job %lld of %s, waiting for %u GPU%s%s",
			 (long long)items[0].job_id, name, items[0].gpus,
			 items[0].gpus == 1 ? "" : "s", more);
	else
		snprintf(out, len, "a GPU runtime of %s%s", name, more);
}

/* GPU runtimes and on-demand GPU jobs waiting for devices of kind (items,
 * in the fair order, of that kind only): as many preemptible GPU jobs on
 * devices of that kind are preempted as the devices free and those already
 * being freed fall short of what waits. A job on another kind of device
 * frees nothing they could use (docs/gpu.md "The queue per kind"). */
static void kind_demand(struct app *app, struct victims *vs, const struct queue_item *items,
			int n, const char *kind)
{
	unsigned ids[QUEUE_LOOK_MAX];
	char waiting[JOB_WAITING_MAX];
	int free_n = gpus_pick_free_kind(app->db, app->gpus, app->cfg, kind, QUEUE_LOOK_MAX, ids);
	int want = 0, coming = 0;

	if (free_n < 0)
		return;
	for (int i = 0; i < n; i++)
		want += (int)items[i].gpus;
	for (int i = 0; i < vs->n; i++)
		if (vs->v[i].preempting && strcmp(vs->v[i].gpu_kind, kind) == 0)
			coming += vs->v[i].gpu_count;
	say_gpu_waiting(app, items, n, waiting, sizeof(waiting));
	for (int i = 0; i < vs->n && free_n + coming < want; i++)
		if (!vs->v[i].preempting && vs->v[i].gpu_count > 0 &&
		    strcmp(vs->v[i].gpu_kind, kind) == 0 && preempt(app, &vs->v[i], waiting))
			coming += vs->v[i].gpu_count;
}

/* GPU runtimes and on-demand GPU jobs wait (the fair queue, which holds no
 * preemptible job): each kind of device waited for is weighed on its own. */
static void gpu_demand(struct app *app, struct victims *vs, int64_t now)
{
	struct queue_item items[QUEUE_LOOK_MAX], of_kind[QUEUE_LOOK_MAX];
	int n = queue_load(app->db, now, items, QUEUE_LOOK_MAX);

	if (n <= 0)
		return;
	queue_order(items, (size_t)n);
	for (int i = 0; i < n; i++) {
		const char *kind = items[i].kind[0] ? items[i].kind : "whole";
		int k = 0;
		bool first = true;
		for (int j = 0; j < i && first; j++)
			first = !queue_is_kind(&items[j], kind);
		if (!first)
			continue;
		for (int j = i; j < n; j++)
			if (queue_is_kind(&items[j], kind))
				of_kind[k++] = items[j];
		kind_demand(app, vs, of_kind, k, kind);
	}
}

/* Whether the pool id still holds its sandbox in the store: a preempted
 * job's pool outlives its stop by the upload and the release, and only its
 * end makes room under the host's cap. */
static bool pool_live(struct app *app, int64_t id)
{
	struct pool p;

	return id && pools_find(app->db, id, &p) == 1 && p.state != POOL_ENDED;
}

/* A GPU runtime whose turn in the fair order has come waits only for a
 * sandbox under the host's cap ([runtime] max_sandboxes) that pools fill
 * (runtime/gpuqueue.c starts it once there is room): one preemptible job,
 * anyone's, gives way, unless one is being preempted already or the last
 * one's pool has not ended yet (its end frees a sandbox). */
static void host_demand(struct app *app, struct victims *vs, int64_t now)
{
	static struct queue_item items[QUEUE_TURN_MAX]; /* the jobs ticker's thread only */
	static int64_t excused[QUEUE_TURN_MAX];		/* the same */
	static int64_t last_pool;			/* the same: the last victim's */
	static unsigned ids[QUEUE_TURN_MAX]; /* the same */
	char waiting[JOB_WAITING_MAX], name[40];
	const struct queue_item *head = NULL;
	int n, free_n = 0, n_excused, live;
	unsigned cap;

	if (caps_host_has_room(app->db, app->cfg, &live, &cap) || live < 0)
		return;
	for (int i = 0; i < vs->n; i++)
		if (vs->v[i].preempting)
			return;
	if (pool_live(app, last_pool))
		return; /* its end makes the room */
	n = queue_load(app->db, now, items, QUEUE_TURN_MAX);
	if (n <= 0)
		return;
	queue_order(items, (size_t)n);
	for (int i = 0; i < n && !head; i++)
		head = items[i].runtime_id ? &items[i] : NULL;
	if (head) /* free devices of the kind it waits for */
		free_n = gpus_pick_free_kind(app->db, app->gpus, app->cfg,
					     head->kind[0] ? head->kind : "whole", QUEUE_TURN_MAX,
					     ids);
	n_excused = queue_excused(app->db, app->cfg, items, (size_t)n, excused, QUEUE_TURN_MAX);
	if (!head || free_n <= 0 || n_excused < 0 ||
	    !queue_runtime_turn(items, (size_t)n, head->runtime_id, (unsigned)free_n, excused,
				(size_t)n_excused))
		return; /* it waits for GPUs or its turn: gpu_demand's, or nobody's */
	user_name(app, head->user_id, name, sizeof(name));
	snprintf(waiting, sizeof(waiting),
		 "a GPU runtime of %s, waiting for the host's cap of %u sandboxes ([runtime] "
		 "max_sandboxes)", name, cap);
	for (int i = 0; i < vs->n; i++)
		if (preempt(app, &vs->v[i], waiting)) {
			last_pool = vs->v[i].pool_id;
			return;
		}
}

/* Which victims may free what j waits for: same_user (its user's pool or
 * GPU cap) or anyone's (the host's cap); gpu: only GPU jobs. */
struct need {
	bool same_user, gpu;
	const char *cap;
};

/* Whether the on-demand job j waits for a cap a preemptible job fills. */
static bool capped(struct app *app, const struct job *j, struct need *need)
{
	struct caps_held h;
	unsigned cap;
	int live = pools_count_live(app->db, j->user_id);

	if (live >= 0 && (unsigned)live >= app->cfg->jobs_max_pools_per_user) {
		*need = (struct need){true, false, "its user's pool cap, [jobs] max_pools_per_user"};
		return true;
	}
	if (!caps_host_has_room(app->db, app->cfg, &live, &cap)) {
		if (live < 0)
			return false; /* the store: not a cap */
		*need = (struct need){false, false, "the host's cap, [runtime] max_sandboxes"};
		return true;
	}
	if (j->gpu && caps_gpus_held(app->db, j->user_id, &h) == 0 &&
	    !caps_gpus_fit(h.runtime_gpus + h.pool_gpus + h.warm_gpus, j->gpu_count,
			   app->cfg->quota_gpus_held)) {
		*need = (struct need){true, true, "its user's GPU cap, [quota] gpus_held"};
		return true;
	}
	return false;
}

static bool fits(const struct job_on_pool *v, const struct job *j, const struct need *need)
{
	return (!need->same_user || v->user_id == j->user_id) && (!need->gpu || v->gpu_count > 0);
}

/* One preemption for the on-demand job j when a cap it waits for is filled
 * by preemptible jobs and none of those is being preempted already. */
static void cap_demand_one(struct app *app, const struct job *j, struct victims *vs)
{
	char waiting[JOB_WAITING_MAX];
	struct need need;

	if (!capped(app, j, &need))
		return;
	for (int i = 0; i < vs->n; i++)
		if (vs->v[i].preempting && fits(&vs->v[i], j, &need))
			return; /* its capacity is being freed */
	snprintf(waiting, sizeof(waiting), "on-demand job %lld of %s, waiting for %s",
		 (long long)j->id, j->user_name, need.cap);
	for (int i = 0; i < vs->n; i++)
		if (!vs->v[i].preempting && fits(&vs->v[i], j, &need) &&
		    preempt(app, &vs->v[i], waiting))
			return;
}

static void cap_demand(struct app *app, const struct jobs_live *live, struct victims *vs)
{
	int looked = 0;
	struct job j;

	for (size_t i = 0; i < live->n && looked < WAITERS_MAX; i++) {
		const struct jobs_live_row *r = &live->row[i];
		if (r->status != JOB_IN_PROGRESS ||
		    !(r->secondary == JOB_PENDING || (r->secondary == JOB_STARTING && !r->pool_id)))
			continue;
		if (jobs_find(app->db, r->id, &j) != 1)
			continue;
		if (!j.preemptible) {
			looked++;
			cap_demand_one(app, &j, vs);
		}
		jobs_row_free(&j);
	}
}

/* A GPU runtime its user started beside their preemptible GPU job (a runtime
 * start does not count preemptible GPUs against [quota] gpus_held): the job
 * gives way when the two exceed the cap. */
static void user_gpu_cap(struct app *app, struct victims *vs)
{
	char waiting[JOB_WAITING_MAX];
	struct caps_held h;

	for (int i = 0; i < vs->n; i++) {
		struct job_on_pool *v = &vs->v[i];
		if (v->preempting || v->gpu_count <= 0 || caps_gpus_held(app->db, v->user_id, &h) < 0)
			continue;
		if (h.runtime_gpus <= 0 ||
		    caps_gpus_fit(h.runtime_gpus + h.pool_gpus + h.warm_gpus - v->gpu_count,
				  v->gpu_count, app->cfg->quota_gpus_held))
			continue;
		snprintf(waiting, sizeof(waiting),
			 "a GPU runtime of %s, beyond their cap of %u GPUs ([quota] gpus_held)",
			 v->user_name, app->cfg->quota_gpus_held);
		preempt(app, v, waiting);
	}
}

void jobs_preempt(struct app *app, const struct jobs_live *live)
{
	struct victims vs = {.n = 0};

	/* nothing preemptible runs: nothing to do (one indexed read) */
	if (jobs_each_preemptible(app->db, collect, &vs) <= 0)
		return;
	kill_overdue(app, &vs);
	gpu_demand(app, &vs, time(NULL));
	host_demand(app, &vs, time(NULL));
	user_gpu_cap(app, &vs);
	cap_demand(app, live, &vs);
}

bool jobs_preempt_requeue(struct app *app, const struct job *j)
{
	char message[JOB_REASON_MAX];
	struct job_move m = {.status = JOB_IN_PROGRESS, .secondary = JOB_PENDING,
			     .at_ms = clock_wall_ms(), .message = message, .clear_pool = true,
			     .preempted = true};

	if (!j->preempting[0] || j->status != JOB_IN_PROGRESS)
		return false;
	snprintf(message, sizeof(message),
		 "Preempted: %s needed its capacity; back in the queue, it resumes from its "
		 "checkpoint folder when capacity frees",
		 j->preempting);
	if (jobs_move(app->db, j->id, &m) == 1) {
		log_info("job %lld of %s: %s", (long long)j->id, j->user_name, message);
		jobs_changed(app, j->id);
	}
	return true;
}

static int count_entry(const struct gpu_queue_entry *e, void *ctx)
{
	(void)e;
	(void)ctx;
	return 0;
}

/* Why the preemptible job j may not start now, or NULL: an on-demand job
 * waits, or GPU runtimes queued would find no room under the host's cap
 * beside it (host_demand would preempt it again at once). */
static const char *held_for(struct app *app)
{
	int waiting = jobs_count_waiting_on_demand(app->db), queued, live;

	if (waiting != 0)
		return waiting > 0 ? "waits: a preemptible job starts when no on-demand job waits"
				   : "";
	queued = gpu_queue_each(app->db, count_entry, NULL);
	if (queued <= 0)
		return queued < 0 ? "" : NULL;
	live = caps_live_sandboxes(app->db);
	if (live < 0)
		return "";
	if ((int64_t)live + queued < (int64_t)capacity_max_sandboxes(app->cfg))
		return NULL;
	return "waits: a preemptible job starts when the host's cap ([runtime] max_sandboxes) "
	       "has room beside the GPU runtimes queued";
}

bool jobs_preempt_may_start(struct app *app, const struct job *j)
{
	const char *why;

	if (!j->preemptible || !(why = held_for(app)))
		return true;
	if (why[0] && jobs_set_wait_message(app->db, j->id, why) == 1)
		jobs_changed(app, j->id);
	return false;
}
