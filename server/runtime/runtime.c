/* runtime.c - the runtime's entry points and the backend's events; see runtime.h. */
#include "runtime/runtime.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/slurm.h"
#include "config/config.h"
#include "labd/app.h"
#include "labd/buf.h"
#include "labd/clock.h"
#include "labd/crypto.h"
#include "labd/log.h"
#include "labd/str.h"
#include "metrics/labd.h"
#include "runtime/endpoint.h"
#include "runtime/gpuqueue.h"
#include "runtime/moves.h"
#include "runtime/poke.h"
#include "runtime/reconcile.h"
#include "sched/caps.h"
#include "store/audit.h"
#include "store/db.h"
#include "store/gpu_queue.h"
#include "store/jobs.h"
#include "store/ttlcache.h"

int runtime_socket_path(const struct runtime *r, char *out, size_t len)
{
	/* a node's runtime: the whole endpoint, which upstream.c and jupyter.c reach
	 * through endpoint.h */
	if (endpoint_is_tcp(r->endpoint))
		return str_copy(out, len, r->endpoint) < 0 ? -1 : 0;
	if (strncmp(r->endpoint, "unix:", 5) != 0)
		return -1;
	return str_copy(out, len, r->endpoint + 5) < 0 ? -1 : 0;
}

/* A GPU start: on a free GPU at once when it is its turn, else queued. */
static enum runtime_start_result gpu_start(struct app *app, int64_t user_id, const char *user,
					   const char *address, const char *token,
					   const struct runtime_resources *res, struct runtime *out)
{
	switch (gpuqueue_start(app, user_id, user, address, token, res, out)) {
	case 0:
		return RUNTIME_START_OK;
	case -ENODEV:
		return RUNTIME_START_NO_GPU;
	case -ENXIO:
		return RUNTIME_START_NO_KIND;
	case -EEXIST:
		return RUNTIME_START_EXISTS;
	default:
		return RUNTIME_START_ERROR;
	}
}

static int any_pool(const struct job_on_pool *v, void *ctx)
{
	(void)v;
	(void)ctx;
	return 1; /* one is enough */
}

/* The capacity caps (docs/operations.md "Capacity"): a start beyond the host's cap
 * is refused, not queued (but a GPU start while preemptible jobs run is queued: one
 * is preempted for it); a GPU start beside GPUs the user's jobs or warm pools hold
 * is refused beyond [quota] gpus_held (the user releases one, or waits). */
static enum runtime_start_result check_caps(struct app *app, int64_t user_id,
					    enum runtime_kind kind)
{
	struct caps_held held;
	unsigned cap;
	int live;

	if (!caps_host_has_room(app->db, app->cfg, &live, &cap)) {
		if (live < 0)
			return RUNTIME_START_ERROR;
		/* a GPU start waits in the queue while a preemptible job gives way
		 * to it (jobs/preempt.c); a CPU start has no queue to wait in */
		if (kind != RUNTIME_GPU || jobs_each_preemptible(app->db, any_pool, NULL) <= 0)
			return RUNTIME_START_HOST_FULL;
	}
	if (kind != RUNTIME_GPU)
		return RUNTIME_START_OK;
	if (caps_gpus_held(app->db, user_id, &held) < 0)
		return RUNTIME_START_ERROR;
	/* a preemptible job's GPUs do not count: it is preempted for this start */
	/* a GPU runtime takes one GPU, whatever the plan's gpus_per_runtime */
	return caps_gpus_fit(held.pool_gpus - held.preemptible_gpus + held.warm_gpus, 1,
			     app->cfg->quota_gpus_held)
		       ? RUNTIME_START_OK
		       : RUNTIME_START_GPUS_HELD;
}

enum runtime_start_result runtime_start(struct app *app, int64_t user_id, const char *user,
					const char *address, enum runtime_kind kind,
					struct runtime *out, struct quota_window *refusal)
{
	char token[RUNTIME_TOKEN_LEN + 1];
	struct runtime_resources res;
	int64_t now = time(NULL);
	int rc;

	rc = runtime_check_quota(app, user_id, kind, now, &res, refusal);
	if (rc < 0)
		return rc == -EDQUOT  ? RUNTIME_START_QUOTA
		       : rc == -EPERM ? RUNTIME_START_NO_GPUS_ALLOWED
				      : RUNTIME_START_ERROR;
	enum runtime_start_result cap = check_caps(app, user_id, kind);
	if (cap != RUNTIME_START_OK)
		return cap;
	if (crypto_random_token(token, sizeof(token), 32) < 0)
		return RUNTIME_START_ERROR;
	if (kind == RUNTIME_GPU)
		return gpu_start(app, user_id, user, address, token, &res, out);
	rc = runtimes_create(app->db, user_id, kind, token, "", now, res.deadline_s, out);
	if (rc == DB_CONFLICT)
		return RUNTIME_START_EXISTS;
	if (rc < 0)
		return RUNTIME_START_ERROR;
	reconcile_own_runtime(out->id);
	runtime_moved(app, user_id);
	runtime_audit(app, now, user, "runtime.start", user, address, runtimes_kind_name(kind));
	runtime_ask_backend(app, out, &res);
	return runtimes_latest(app->db, user_id, out) == 1 ? RUNTIME_START_OK : RUNTIME_START_ERROR;
}

int runtime_stop(struct app *app, const struct runtime *r, const char *reason)
{
	if (r->state == RUNTIME_QUEUED) { /* no sandbox yet: it just leaves the queue */
		runtime_end(app, r, false, reason);
		return 0;
	}
	int rc = backend_stop(app->backend, r->user_name, r->id, reason);

	if (rc == 0) {
		runtimes_set_state(app->db, r->id, RUNTIME_STOPPING, reason, time(NULL));
		runtime_moved(app, r->user_id);
	} else if (rc == -ENOENT) /* the backend has no such sandbox: it is already gone */
		runtime_end(app, r, r->state == RUNTIME_STARTING, reason);
	return rc == -ENOENT ? 0 : rc;
}

int runtime_backend_ping(struct app *app)
{
	return backend_ping(app->backend);
}

int runtime_end_account(struct app *app, int64_t user_id, const char *reason)
{
	struct runtime r;
	int found = runtimes_live(app->db, user_id, &r);

	if (found < 0)
		return -EIO;
	if (found == 0 || r.state == RUNTIME_STOPPING)
		return 0;
	return runtime_stop(app, &r, reason);
}

int runtime_forget_account(struct app *app, const char *user, int64_t user_id)
{
	int rc = backend_user_deleted(app->backend, user, user_id);

	if (rc < 0)
		log_error("the supervisor did not take the deletion of %s (%s): their home stays "
			  "under its id", user, strerror(-rc));
	return rc;
}

/* How long a home's last usage may stand in for a reading the backend cannot
 * give: a home whose runtime just ended is unmounted but its loop device not
 * yet released for a moment, and its superblock is not final until then, so
 * the backend answers busy; the figure from before is the truth of that
 * moment. Longer than any teardown, short enough not to mislead. */
#define HOME_USAGE_KEEP_MS (10 * 60 * 1000LL)

static void home_key(int64_t user_id, unsigned char key[TTLCACHE_KEY_LEN])
{
	memset(key, 0, TTLCACHE_KEY_LEN);
	memcpy(key, &user_id, sizeof(user_id));
}

int runtime_home_usage(struct app *app, const char *user, int64_t user_id,
		       struct backend_home *out)
{
	unsigned char key[TTLCACHE_KEY_LEN];
	int rc = backend_home_usage(app->backend, user, user_id, out);

	home_key(user_id, key);
	if (rc == 0)
		ttlcache_put(app->home_usage, key, 0, clock_ms() + HOME_USAGE_KEEP_MS, out);
	else if (rc == -EBUSY && ttlcache_get(app->home_usage, key, 0, clock_ms(), out))
		rc = 0;
	return rc;
}

int runtime_home_resize(struct app *app, const char *user, int64_t user_id, int64_t size_bytes,
			enum backend_home_applied *applied)
{
	return backend_home_resize(app->backend, user, user_id, size_bytes, applied);
}

const char *runtime_backend_warnings(struct app *app)
{
	return backend_warnings(app->backend);
}

/* The live row an event is about, if it is still the same runtime. */
static bool event_row(struct app *app, const char *user, int64_t runtime_id, struct runtime *r)
{
	return runtimes_live_by_name(app->db, user, r) == 1 && (runtime_id == 0 || runtime_id == r->id);
}

static void on_ready(void *ctx, const char *user, int64_t runtime_id, const char *endpoint)
{
	struct runtime r;

	if (event_row(ctx, user, runtime_id, &r) && r.state == RUNTIME_STARTING)
		runtime_mark_ready(ctx, &r, endpoint);
}

static void on_ended(void *ctx, const char *user, int64_t runtime_id, const char *cause,
		     bool failed, const char *reason)
{
	struct runtime r;

	(void)cause;
	if (event_row(ctx, user, runtime_id, &r))
		runtime_end(ctx, &r, failed || r.state == RUNTIME_STARTING,
			    reason[0] ? reason : "the runtime ended");
}

static void on_warning(void *ctx, const char *user, int64_t runtime_id, int64_t seconds_left)
{
	(void)ctx;
	log_info("runtime %lld of %s: %lld seconds left", (long long)runtime_id, user,
		 (long long)seconds_left);
}

static void on_connected(void *ctx)
{
	struct app *app = ctx;
	reconcile_wake(app);
}

void runtime_events_init(struct backend_events *ev, struct app *app)
{
	*ev = (struct backend_events){.connected = on_connected, .ready = on_ready,
				      .ended = on_ended, .warning = on_warning, .ctx = app};
}

int runtime_backend_queue(struct app *app, int64_t runtime_id, char *text, size_t len,
			  int64_t *estimate_at)
{
	return backend_slurm_queue(app->backend, runtime_id, text, len, estimate_at);
}

int runtime_backend_placed_at(struct app *app, int64_t runtime_id, int64_t *at)
{
	return backend_slurm_placed_at(app->backend, runtime_id, at);
}
