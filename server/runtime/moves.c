/* moves.c - the shared moves of a runtime's row; see moves.h. */
#include "runtime/moves.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "config/config.h"
#include "labd/app.h"
#include "labd/fault.h"
#include "labd/log.h"
#include "metrics/labd.h"
#include "notify/notify.h"
#include "runtime/poke.h"
#include "runtime/watch.h"
#include "sched/gpus.h"
#include "sched/queue.h"
#include "store/audit.h"
#include "store/gpu_queue.h"
#include "store/plans.h"

/* Entries looked at per replan; more wait for a later pass (in arrival order). */
#define QUEUE_PASS_MAX 256

void runtime_moved(struct app *app, int64_t user_id)
{
	runtime_watch_notify(app->watch, user_id);
	/* its due times (start timeout, idle cull) may have changed: the
	 * reconciler's pass recomputes them, and sleeps again */
	reconcile_poke(app);
}

void runtime_audit(struct app *app, int64_t now, const char *actor, const char *action,
		   const char *user, const char *address, const char *detail)
{
	if (audit_add(app->db, now, actor, action, user, address, detail) < 0)
		log_error("audit: %s of %s not recorded", action, user);
}

/* Ends a live row once: audit, log, and tell the proxy to let go. A GPU
 * runtime that ends frees a GPU or a place in the queue: the reconciler's
 * next pass (poked at once) starts whoever is next. */
void runtime_end(struct app *app, const struct runtime *r, bool failed, const char *reason)
{
	int64_t now = time(NULL);

	if (runtimes_set_state(app->db, r->id, failed ? RUNTIME_FAILED : RUNTIME_STOPPED, reason,
			       now) != 1)
		return;
	runtime_moved(app, r->user_id);
	void (*ended)(struct app *, const struct runtime *) =
		__atomic_load_n(&app->on_runtime_ended, __ATOMIC_SEQ_CST);
	if (ended)
		ended(app, r);
	runtime_audit(app, now, NULL, failed ? "runtime.failed" : "runtime.end", r->user_name, NULL,
		      reason);
	log_info("runtime of %s %s: %s", r->user_name, failed ? "failed" : "ended", reason);
	notify_runtime_ended(app, r->user_id, r->id, runtimes_kind_name(r->kind), failed, reason);
	if (r->kind == RUNTIME_GPU)
		reconcile_poke(app);
}

/* The GPU the backend said is still held (its teardown has not finished):
 * the start waits in the queue again, keeping its place in time. */
static void back_to_queue(struct app *app, const struct runtime *r)
{
	int64_t queued_at = r->queued_at ? r->queued_at : r->created_at;
	int64_t expires_at = r->queue_expires_at ? r->queue_expires_at
						 : queued_at + app->cfg->gpu_queue_max_wait_s;

	log_info("GPU %s for %s's runtime is still held; queued again", r->gpus, r->user_name);
	if (gpu_queue_put_back(app->db, r->id, queued_at, expires_at) == 1) {
		runtime_queue_replan(app); /* its place (0 until computed) before anyone reads it */
		runtime_moved(app, r->user_id);
		reconcile_poke(app);
	} else {
		runtime_end(app, r, true, "could not start: the GPU is still held by another sandbox");
	}
}

void runtime_ask_backend(struct app *app, struct runtime *r, const struct runtime_resources *res)
{
	struct backend_start s = {.user = r->user_name, .user_id = r->user_id,
				  .runtime_id = r->id, .kind = runtimes_kind_name(r->kind),
				  .token = r->token, .deadline_s = r->deadline,
				  .shape = res->size};
	char endpoint[BACKEND_ENDPOINT_MAX], err[160], reason[RUNTIME_REASON_MAX];
	char hash[BACKEND_IMAGE_HASH_MAX];
	int rc;

	struct gpu_info dev;

	s.shape.image = res->image;
	s.shape.n_gpus = 0; /* the row's GPU, not the plan's count */
	if (r->gpus[0])
		s.shape.gpus[s.shape.n_gpus++] = (unsigned)strtoul(r->gpus, NULL, 10);
	/* a MIG instance is named to CUDA by its uuid (docs/sandbox.md "GPUs") */
	if (s.shape.n_gpus && app->gpus && gpus_find(app->gpus, s.shape.gpus[0], &dev) &&
	    dev.uuid[0])
		s.gpu_uuids[0] = dev.uuid;
	s.image_hash = hash;
	FAULT_POINT("runtime.start.send.before");
	rc = backend_start(app->backend, &s, endpoint, err, sizeof(err));
	FAULT_POINT("runtime.start.send.after");
	/* the row names its image even when the start failed on it */
	if (res->image[0] &&
	    runtimes_set_image(app->db, r->id, res->image, rc == 0 ? hash : "") < 0)
		log_error("runtime %lld: its image %s was not recorded", (long long)r->id, res->image);
	if (rc == 0) {
		if (endpoint[0])
			runtimes_set_endpoint(app->db, r->id, endpoint);
		return;
	}
	if (rc == -EBUSY && r->kind == RUNTIME_GPU) {
		back_to_queue(app, r);
		return;
	}
	if (rc == -ETIMEDOUT) {
		/* it may still come up: let the reconciler decide from the list */
		log_warn("the supervisor did not answer the start of %s's runtime", r->user_name);
		reconcile_wake(app);
		return;
	}
	snprintf(reason, sizeof(reason), "could not start: %.140s", err[0] ? err : strerror(-rc));
	runtime_end(app, r, true, reason);
}

/* What the user's plan gives a runtime: the sandbox's size (memory, CPUs,
 * home) and, for the backend, nothing the supervisor would not check again. */
static void plan_resources(const struct quota_status *st, struct runtime_resources *res)
{
	const int64_t *v = st->eff.v;

	res->size.memory_bytes = v[QL_MEMORY_BYTES] == QUOTA_UNLIMITED ? 0 : v[QL_MEMORY_BYTES];
	res->size.cpus_milli = v[QL_CPUS_MILLI] == QUOTA_UNLIMITED ? 0 : v[QL_CPUS_MILLI];
	res->size.home_size_bytes = v[QL_STORAGE_BYTES] == QUOTA_UNLIMITED ? 0 : v[QL_STORAGE_BYTES];
	res->size.network = v[QL_NETWORK] == QUOTA_NETWORK_EGRESS;
	res->size.egress_bytes_per_s =
		v[QL_EGRESS_BYTES_PER_S] == QUOTA_UNLIMITED ? 0 : v[QL_EGRESS_BYTES_PER_S];
	res->gpus = quota_gpus_per_runtime(st);
}

int runtime_check_quota(struct app *app, int64_t user_id, enum runtime_kind kind, int64_t now,
			struct runtime_resources *res, struct quota_window *refusal)
{
	struct quota_status st;
	struct quota_window ignored;
	int rc = quota_status_read(app->db, app->cfg, user_id, now, &st);

	if (rc < 0) {
		/* refuse rather than start a runtime nobody can bound */
		log_error("quota of user %lld unreadable: %s", (long long)user_id, strerror(-rc));
		return -EIO;
	}
	plan_resources(&st, res);
	if (plans_user_image(app->db, user_id, res->image, sizeof(res->image)) < 0)
		return -EIO; /* never a silent start on the wrong root */
	/* on a slice of a card each second charges its fraction (docs/gpu.md): the
	 * windows' remainder lasts longer; the kind's largest fraction bounds it */
	char gpu_kind[PLAN_GPU_MAX];
	unsigned fraction = 1000;
	if (kind == RUNTIME_GPU) {
		if (plans_user_gpu(app->db, user_id, gpu_kind, sizeof(gpu_kind)) < 0)
			return -EIO;
		fraction = gpus_kind_fraction_milli(app->gpus, app->cfg, gpu_kind);
	}
	switch (quota_check_start_slice(&st, kind, fraction, &res->deadline_s,
					refusal ? refusal : &ignored)) {
	case QUOTA_START_EXCEEDED:
		return -EDQUOT;
	case QUOTA_START_NO_GPUS:
		return -EPERM;
	case QUOTA_START_ALLOWED:
		break;
	}
	return 0;
}

/* The quota was checked when the start was asked for, and a queued runtime
 * uses none, so a refusal here means only that the rolling window moved on
 * while it waited: it then gets the shortest runtime the check allows. */
int runtime_resources_read(struct app *app, int64_t user_id, enum runtime_kind kind, int64_t now,
			   struct runtime_resources *res)
{
	int rc = runtime_check_quota(app, user_id, kind, now, res, NULL);

	if (rc == -EIO)
		return -EIO;
	if (rc < 0)
		res->deadline_s = now + QUOTA_MIN_START_S;
	return 0;
}

void runtime_mark_ready(struct app *app, const struct runtime *r, const char *endpoint)
{
	int64_t now = time(NULL);

	if (endpoint && endpoint[0] && strcmp(endpoint, r->endpoint) != 0)
		runtimes_set_endpoint(app->db, r->id, endpoint);
	if (runtimes_set_state(app->db, r->id, RUNTIME_RUNNING, NULL, now) == 1) {
		runtime_moved(app, r->user_id);
		runtime_audit(app, now, NULL, "runtime.ready", r->user_name, NULL,
			      runtimes_kind_name(r->kind));
		metrics_runtime_ready(now - r->created_at);
		log_info("runtime of %s is ready after %lld s", r->user_name,
			 (long long)(now - r->created_at));
	}
}

/* Places and estimates of the entries waiting for devices of kind (items in
 * order), from when each device of that kind frees. 0 or -EIO. */
static int replan_kind(struct app *app, struct queue_item *items, int n, const char *kind,
		       int64_t now)
{
	struct gpu_hold holds[GPUS_DEVICES_MAX];
	int64_t free_at[GPUS_DEVICES_MAX];
	int g = gpus_holders_kind(app->db, app->gpus, app->cfg, kind, now, holds, GPUS_DEVICES_MAX);

	if (g < 0)
		return -EIO;
	for (int i = 0; i < g; i++)
		free_at[i] = holds[i].free_at;
	queue_estimate(items, (size_t)n, kind, free_at, (size_t)g, now);
	return 0;
}

/* Each kind of device waited for gets its own places and estimates. 0 or -EIO. */
static int replan_kinds(struct app *app, struct queue_item *items, int n, int64_t now)
{
	for (int i = 0; i < n; i++) {
		const char *kind = items[i].kind[0] ? items[i].kind : "whole";
		bool first = true;
		for (int k = 0; k < i && first; k++)
			first = !queue_is_kind(&items[k], kind);
		if (first && replan_kind(app, items, n, kind, now) < 0)
			return -EIO;
	}
	return 0;
}

void runtime_queue_replan(struct app *app)
{
	struct queue_item items[QUEUE_PASS_MAX];
	struct gpu_hold holds[CONFIG_MAX_GPUS];
	int64_t now = time(NULL), allocated = 0;
	int n, g;

	gpus_alloc_lock(app->gpus);
	n = queue_load(app->db, now, items, QUEUE_PASS_MAX);
	g = gpus_holders(app->db, app->cfg, now, holds);
	if (n >= 0 && g >= 0) {
		for (int i = 0; i < g; i++)
			allocated += gpus_hold_busy(&holds[i]);
		queue_order(items, (size_t)n);
		/* on a store error no place is written: the next pass places them */
		bool placed = replan_kinds(app, items, n, now) == 0;
		for (int i = 0; placed && i < n; i++)
			if (items[i].runtime_id && gpu_queue_set_place(app->db, items[i].runtime_id, items[i].position,
						items[i].estimate_at) == 1)
				runtime_moved(app, items[i].user_id);
		metrics_gpu_queue_set(n);
		metrics_gpus_set(g, allocated);
	}
	gpus_alloc_unlock(app->gpus);
}
