/* runtime.c - runtime lifecycle and reconciliation; see runtime.h. */
#include "runtime/runtime.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "config/config.h"
#include "labd/app.h"
#include "labd/buf.h"
#include "labd/clock.h"
#include "labd/crypto.h"
#include "labd/log.h"
#include "labd/str.h"
#include "metrics/labd.h"
#include "runtime/reconcile.h"
#include "runtime/watch.h"
#include "store/audit.h"
#include "store/db.h"
#include "store/gpu_queue.h"
#include "store/ttlcache.h"

/* A start in flight for this long before a missing sandbox counts. */
#define START_GRACE_S 10

int runtime_socket_path(const struct runtime *r, char *out, size_t len)
{
	if (strncmp(r->endpoint, "unix:", 5) != 0)
		return -1;
	return str_copy(out, len, r->endpoint + 5) < 0 ? -1 : 0;
}

void runtime_audit(struct app *app, int64_t now, const char *actor, const char *action,
		   const char *user, const char *address, const char *detail)
{
	if (audit_add(app->db, now, actor, action, user, address, detail) < 0)
		log_error("audit: %s of %s not recorded", action, user);
}

/* Ends a live row once: audit, log, and tell the proxy to let go. A GPU
 * runtime that ends frees a GPU or a place in the queue: the reconciler
 * thread's next pass (woken at once) starts whoever is next. */
static void end_runtime(struct app *app, const struct runtime *r, bool failed, const char *reason)
{
	int64_t now = time(NULL);

	if (runtimes_set_state(app->db, r->id, failed ? RUNTIME_FAILED : RUNTIME_STOPPED, reason,
			       now) != 1)
		return;
	runtime_watch_notify(app->watch, r->user_id);
	void (*ended)(struct app *, const struct runtime *) =
		__atomic_load_n(&app->on_runtime_ended, __ATOMIC_SEQ_CST);
	if (ended)
		ended(app, r);
	runtime_audit(app, now, NULL, failed ? "runtime.failed" : "runtime.end", r->user_name, NULL,
		      reason);
	log_info("runtime of %s %s: %s", r->user_name, failed ? "failed" : "ended", reason);
	if (r->kind == RUNTIME_GPU)
		reconcile_poke(app->reconciler);
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
		runtime_watch_notify(app->watch, r->user_id);
		reconcile_poke(app->reconciler);
	} else {
		end_runtime(app, r, true, "could not start: the GPU is still held by another sandbox");
	}
}

void runtime_ask_backend(struct app *app, struct runtime *r, const struct runtime_resources *res)
{
	struct backend_start s = {.user = r->user_name, .user_id = r->user_id,
				  .runtime_id = r->id, .kind = runtimes_kind_name(r->kind),
				  .token = r->token, .deadline_s = r->deadline,
				  .shape = {.memory_bytes = res->memory_bytes,
					    .cpus_milli = res->cpus_milli,
					    .home_size_bytes = res->home_size_bytes,
					    .network = res->network,
					    .egress_bytes_per_s = res->egress_bytes_per_s,
					    .image = res->image}};
	char endpoint[BACKEND_ENDPOINT_MAX], err[160], reason[RUNTIME_REASON_MAX];
	char hash[BACKEND_IMAGE_HASH_MAX];
	int rc;

	if (r->gpus[0])
		s.shape.gpus[s.shape.n_gpus++] = (unsigned)strtoul(r->gpus, NULL, 10);
	s.image_hash = hash;
	rc = backend_start(app->backend, &s, endpoint, err, sizeof(err));
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
		reconcile_wake(app->reconciler);
		return;
	}
	snprintf(reason, sizeof(reason), "could not start: %.140s", err[0] ? err : strerror(-rc));
	end_runtime(app, r, true, reason);
}

void runtime_end(struct app *app, const struct runtime *r, bool failed, const char *reason)
{
	end_runtime(app, r, failed, reason);
}

/* What the user's plan gives a runtime: the sandbox's size (memory, CPUs,
 * home) and, for the backend, nothing the supervisor would not check again. */
static void plan_resources(const struct quota_status *st, struct runtime_resources *res)
{
	const int64_t *v = st->eff.v;

	res->memory_bytes = v[QL_MEMORY_BYTES] == QUOTA_UNLIMITED ? 0 : v[QL_MEMORY_BYTES];
	res->cpus_milli = v[QL_CPUS_MILLI] == QUOTA_UNLIMITED ? 0 : v[QL_CPUS_MILLI];
	res->home_size_bytes = v[QL_STORAGE_BYTES] == QUOTA_UNLIMITED ? 0 : v[QL_STORAGE_BYTES];
	res->network = v[QL_NETWORK] == QUOTA_NETWORK_EGRESS;
	res->egress_bytes_per_s =
		v[QL_EGRESS_BYTES_PER_S] == QUOTA_UNLIMITED ? 0 : v[QL_EGRESS_BYTES_PER_S];
	res->gpus = quota_gpus_per_runtime(st);
}

/* The quota check at start: the deadline when allowed. */
static enum runtime_start_result check_quota(struct app *app, int64_t user_id,
					     enum runtime_kind kind, int64_t now,
					     struct runtime_resources *res,
					     struct quota_window *refusal)
{
	struct quota_status st;
	struct quota_window ignored;
	int rc = quota_status_read(app->db, app->cfg, user_id, now, &st);

	if (rc < 0) {
		/* refuse rather than start a runtime nobody can bound */
		log_error("quota of user %lld unreadable: %s", (long long)user_id, strerror(-rc));
		return RUNTIME_START_ERROR;
	}
	plan_resources(&st, res);
	if (plans_user_image(app->db, user_id, res->image, sizeof(res->image)) < 0)
		return RUNTIME_START_ERROR; /* never a silent start on the wrong root */
	switch (quota_check_start(&st, kind, &res->deadline_s, refusal ? refusal : &ignored)) {
	case QUOTA_START_EXCEEDED:
		return RUNTIME_START_QUOTA;
	case QUOTA_START_NO_GPUS:
		return RUNTIME_START_NO_GPUS_ALLOWED;
	case QUOTA_START_ALLOWED:
		break;
	}
	return RUNTIME_START_OK;
}

/* The quota was checked when the start was asked for, and a queued runtime
 * uses none, so a refusal here means only that the rolling window moved on
 * while it waited: it then gets the shortest runtime the check allows. */
int runtime_resources_read(struct app *app, int64_t user_id, enum runtime_kind kind, int64_t now,
			   struct runtime_resources *res)
{
	enum runtime_start_result verdict = check_quota(app, user_id, kind, now, res, NULL);

	if (verdict == RUNTIME_START_ERROR)
		return -EIO;
	if (verdict != RUNTIME_START_OK)
		res->deadline_s = now + QUOTA_MIN_START_S;
	return 0;
}

enum runtime_start_result runtime_start(struct app *app, int64_t user_id, const char *user,
					const char *address, enum runtime_kind kind,
					struct runtime *out, struct quota_window *refusal)
{
	char token[RUNTIME_TOKEN_LEN + 1];
	struct runtime_resources res;
	int64_t now = time(NULL);
	enum runtime_start_result verdict;
	int rc;

	if ((verdict = check_quota(app, user_id, kind, now, &res, refusal)) != RUNTIME_START_OK)
		return verdict;
	if (crypto_random_token(token, sizeof(token), 32) < 0)
		return RUNTIME_START_ERROR;
	if (kind == RUNTIME_GPU)
		return runtime_gpu_start(app, user_id, user, address, token, &res, out);
	rc = runtimes_create(app->db, user_id, kind, token, "", now, res.deadline_s, out);
	if (rc == DB_CONFLICT)
		return RUNTIME_START_EXISTS;
	if (rc < 0)
		return RUNTIME_START_ERROR;
	runtime_watch_notify(app->watch, user_id);
	runtime_audit(app, now, user, "runtime.start", user, address, runtimes_kind_name(kind));
	runtime_ask_backend(app, out, &res);
	return runtimes_latest(app->db, user_id, out) == 1 ? RUNTIME_START_OK : RUNTIME_START_ERROR;
}

int runtime_stop(struct app *app, const struct runtime *r, const char *reason)
{
	if (r->state == RUNTIME_QUEUED) { /* no sandbox yet: it just leaves the queue */
		end_runtime(app, r, false, reason);
		return 0;
	}
	int rc = backend_stop(app->backend, r->user_name, r->id, reason);

	if (rc == 0) {
		runtimes_set_state(app->db, r->id, RUNTIME_STOPPING, reason, time(NULL));
		runtime_watch_notify(app->watch, r->user_id);
	} else if (rc == -ENOENT) /* the backend has no such sandbox: it is already gone */
		end_runtime(app, r, r->state == RUNTIME_STARTING, reason);
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

static void mark_ready(struct app *app, const struct runtime *r, const char *endpoint)
{
	int64_t now = time(NULL);

	if (endpoint && endpoint[0] && strcmp(endpoint, r->endpoint) != 0)
		runtimes_set_endpoint(app->db, r->id, endpoint);
	if (runtimes_set_state(app->db, r->id, RUNTIME_RUNNING, NULL, now) == 1) {
		runtime_watch_notify(app->watch, r->user_id);
		runtime_audit(app, now, NULL, "runtime.ready", r->user_name, NULL,
			      runtimes_kind_name(r->kind));
		metrics_runtime_ready(now - r->created_at);
		log_info("runtime of %s is ready after %lld s", r->user_name,
			 (long long)(now - r->created_at));
	}
}

static void on_ready(void *ctx, const char *user, int64_t runtime_id, const char *endpoint)
{
	struct runtime r;

	if (event_row(ctx, user, runtime_id, &r) && r.state == RUNTIME_STARTING)
		mark_ready(ctx, &r, endpoint);
}

static void on_ended(void *ctx, const char *user, int64_t runtime_id, const char *cause,
		     bool failed, const char *reason)
{
	struct runtime r;

	(void)cause;
	if (event_row(ctx, user, runtime_id, &r))
		end_runtime(ctx, &r, failed || r.state == RUNTIME_STARTING,
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
	reconcile_wake(app->reconciler);
}

void runtime_events_init(struct backend_events *ev, struct app *app)
{
	*ev = (struct backend_events){.connected = on_connected, .ready = on_ready,
				      .ended = on_ended, .warning = on_warning, .ctx = app};
}

/* ---- total reconciliation ---- */

/* The live rows, copied out of the walk (the backend is not called under the
 * store's lock), in one bounded buffer: past ROWS_MAX live runtimes nothing is
 * decided, rather than deciding on part of them. */
#define ROWS_MAX 4096

struct rows {
	struct buf b;
	const struct runtime *r; /* b's data once the walk is done */
	size_t n;
};

static int collect_row(const struct runtime *r, void *ctx)
{
	struct rows *rows = ctx;
	return buf_add(&rows->b, r, sizeof(*r)) < 0; /* non-zero stops the walk */
}

static int collect_rows(struct app *app, struct rows *rows)
{
	buf_init(&rows->b, ROWS_MAX * sizeof(struct runtime));
	if (runtimes_each_live(app->db, collect_row, rows) < 0 ||
	    rows->b.len % sizeof(struct runtime) != 0)
		return -1;
	rows->r = (const struct runtime *)rows->b.data;
	rows->n = rows->b.len / sizeof(struct runtime);
	return 0;
}

static const struct backend_sandbox *find_sandbox(const struct backend_sandbox *s, size_t n,
						  const char *user)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(s[i].user, user) == 0)
			return &s[i];
	return NULL;
}

static bool same_runtime(const struct backend_sandbox *s, const struct runtime *r)
{
	return s->runtime_id == 0 || s->runtime_id == r->id;
}

/* One live row against what the backend holds for its user. */
static void reconcile_row(struct app *app, const struct runtime *r, const struct backend_sandbox *s,
			  int64_t now)
{
	if (r->state == RUNTIME_QUEUED)
		return; /* no sandbox until it leaves the queue (runtime_queue_tick) */
	if (!s || !same_runtime(s, r)) {
		if (r->state != RUNTIME_STARTING || now - r->created_at > START_GRACE_S)
			end_runtime(app, r, true, "the runtime's sandbox is gone");
		return;
	}
	if (strcmp(s->state, "ended") == 0) {
		end_runtime(app, r, s->failed || r->state == RUNTIME_STARTING,
			    s->reason[0] ? s->reason : "the runtime ended");
	} else if (strcmp(s->state, "stopping") == 0 && r->state != RUNTIME_STOPPING) {
		runtimes_set_state(app->db, r->id, RUNTIME_STOPPING, s->reason, now);
		runtime_watch_notify(app->watch, r->user_id);
	} else if (strcmp(s->state, "running") == 0 && r->state == RUNTIME_STOPPING) {
		/* a stop the supervisor never heard of (it restarted meanwhile) */
		backend_stop(app->backend, r->user_name, r->id, r->reason[0] ? r->reason : "stopped");
	} else if (s->ready && r->state == RUNTIME_STARTING) {
		mark_ready(app, r, NULL); /* the ready event came before we listened */
	}
}

/* A sandbox that no live row accounts for is stopped. */
static void stop_strays(struct app *app, const struct rows *rows, const struct backend_sandbox *s,
			size_t n)
{
	for (size_t i = 0; i < n; i++) {
		bool owned = false;
		if (strcmp(s[i].state, "ended") == 0 || strcmp(s[i].state, "stopping") == 0)
			continue;
		for (size_t k = 0; k < rows->n && !owned; k++)
			owned = rows->r[k].state != RUNTIME_QUEUED &&
				strcmp(rows->r[k].user_name, s[i].user) == 0 &&
				same_runtime(&s[i], &rows->r[k]);
		if (owned)
			continue;
		log_warn("stopping the sandbox of %s: no live runtime %lld accounts for it", s[i].user,
			 (long long)s[i].runtime_id);
		backend_stop(app->backend, s[i].user, s[i].runtime_id, "no runtime owns this sandbox");
	}
}

/* Keeps the runtimes' sandboxes: job sandboxes (pools) are jobs/' to reconcile. */
static size_t runtimes_only(struct backend_sandbox *s, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (s[i].pool_id == 0)
			s[k++] = s[i];
	return k;
}

int runtime_reconcile_all(struct app *app)
{
	struct backend_sandbox *s = NULL;
	struct rows rows;
	size_t n = 0;
	int64_t now = time(NULL);
	int rc = 0;

	if (backend_list(app->backend, &s, &n) < 0)
		return -1; /* decide nothing without the backend's word */
	n = runtimes_only(s, n);
	if (collect_rows(app, &rows) == 0) {
		for (size_t i = 0; i < rows.n; i++)
			reconcile_row(app, &rows.r[i], find_sandbox(s, n, rows.r[i].user_name), now);
		stop_strays(app, &rows, s, n);
	} else {
		rc = -1;
		log_error("reconcile: cannot read the live runtimes (more than %d?)", ROWS_MAX);
	}
	buf_release(&rows.b);
	free(s);
	return rc;
}
