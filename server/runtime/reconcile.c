/* reconcile.c - the web process's runtime timers; see reconcile.h. */
#include "runtime/reconcile.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "labd/app.h"
#include "labd/log.h"
#include "runtime/jupyter.h"
#include "runtime/runtime.h"
#include "runtime/watch.h"
#include "store/ledger.h"
#include "store/runtimes.h"

#define TIMER_EVERY_S 1
#define SAFETY_NET_S 300 /* total reconciliation even when nothing asked for it */

struct reconciler {
	struct app *app;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stopping, wanted, poked;
};

/* The rows to look at, copied so no store lock is held over Jupyter calls. */
struct due {
	struct runtime r[64];
	int n;
	int64_t now;
	const struct labd_config *cfg;
};

static int collect_due(const struct runtime *r, void *ctx)
{
	struct due *d = ctx;
	bool start_late = r->state == RUNTIME_STARTING && d->now - r->created_at > d->cfg->start_timeout_s;
	/* last_activity lags by up to the touch interval: never cull early */
	bool idle = r->state == RUNTIME_RUNNING && d->cfg->idle_timeout_s > 0 &&
		    d->now - r->last_activity >= d->cfg->idle_timeout_s + RUNTIME_TOUCH_INTERVAL_S;

	if ((start_late || idle) && d->n < 64)
		d->r[d->n++] = *r;
	return 0;
}

static void fail_start(struct app *app, const struct runtime *r)
{
	char reason[RUNTIME_REASON_MAX];

	snprintf(reason, sizeof(reason), "jupyter did not answer within %lld seconds",
		 (long long)app->cfg->start_timeout_s);
	if (runtime_stop(app, r, reason) == 0) {
		runtimes_set_state(app->db, r->id, RUNTIME_FAILED, reason, time(NULL));
		runtime_watch_notify(app->watch, r->user_id);
	}
}

/* Active = a recent request, an open WebSocket or a busy kernel. */
static void cull_if_idle(struct app *app, const struct runtime *r, int64_t now)
{
	char socket_path[RUNTIME_ENDPOINT_MAX], reason[RUNTIME_REASON_MAX];

	if ((app->active_websockets &&
	     app->active_websockets(app, r->user_name, app->cfg->idle_timeout_s) > 0) ||
	    (runtime_socket_path(r, socket_path, sizeof(socket_path)) == 0 &&
	     jupyter_kernels_busy(socket_path, r->user_name, r->token) == 1)) {
		runtimes_touch(app->db, r->id, now);
		return;
	}
	snprintf(reason, sizeof(reason), "idle for %lld seconds", (long long)app->cfg->idle_timeout_s);
	if (runtime_stop(app, r, reason) == 0)
		runtime_audit(app, now, NULL, "runtime.cull", r->user_name, NULL, reason);
}

void reconcile_timers(struct app *app)
{
	struct due d = {.now = time(NULL), .cfg = app->cfg};

	if (runtimes_each_live(app->db, collect_due, &d) < 0)
		return;
	for (int i = 0; i < d.n; i++) {
		if (d.r[i].state == RUNTIME_STARTING)
			fail_start(app, &d.r[i]);
		else
			cull_if_idle(app, &d.r[i], d.now);
	}
}

/* Advances the open ledger entries every LEDGER_HEARTBEAT_S, but only once a
 * total reconciliation has matched the rows to the backend's sandboxes since
 * this process started: after a crash, a runtime is billed on only when its
 * sandbox is known to have lived on. */
static void heartbeat(struct app *app, bool confirmed, time_t *last_beat)
{
	time_t now = time(NULL);

	if (!confirmed || now - *last_beat < LEDGER_HEARTBEAT_S)
		return;
	if (ledger_heartbeat(app->db, now) < 0)
		log_error("ledger: heartbeat not recorded; retrying");
	else
		*last_beat = now;
}

static void *loop(void *arg)
{
	struct reconciler *rc = arg;
	struct timespec until;
	time_t last_full = time(NULL), last_beat = 0;
	bool confirmed = false;

	pthread_mutex_lock(&rc->lock);
	while (!rc->stopping) {
		bool full = rc->wanted || time(NULL) - last_full >= SAFETY_NET_S;
		rc->wanted = rc->poked = false;
		pthread_mutex_unlock(&rc->lock);
		if (full && runtime_reconcile_all(rc->app) == 0) {
			last_full = time(NULL);
			confirmed = true;
		}
		reconcile_timers(rc->app);
		runtime_queue_tick(rc->app);
		heartbeat(rc->app, confirmed, &last_beat);
		pthread_mutex_lock(&rc->lock);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += TIMER_EVERY_S;
		if (!rc->stopping && !rc->wanted && !rc->poked)
			pthread_cond_timedwait(&rc->wake, &rc->lock, &until);
	}
	pthread_mutex_unlock(&rc->lock);
	return NULL;
}

int reconcile_start(struct app *app, struct reconciler **out)
{
	struct reconciler *rc = calloc(1, sizeof(*rc));

	if (!rc)
		return log_errno("reconcile: calloc");
	/* recovery: entries whose runtime ended while no process watched */
	int closed = ledger_recover(app->db);
	if (closed < 0) {
		free(rc);
		return log_error("ledger: cannot recover the open entries");
	}
	if (closed > 0)
		log_warn("ledger: closed %d entries at their last heartbeat", closed);
	rc->app = app;
	rc->wanted = true; /* the channel may have come up before the thread */
	pthread_mutex_init(&rc->lock, NULL);
	pthread_cond_init(&rc->wake, NULL);
	if (pthread_create(&rc->thread, NULL, loop, rc) != 0) {
		free(rc);
		return log_error("reconcile: cannot start its thread");
	}
	*out = rc;
	return 0;
}

void reconcile_wake(struct reconciler *rc)
{
	if (!rc)
		return;
	pthread_mutex_lock(&rc->lock);
	rc->wanted = true;
	pthread_cond_signal(&rc->wake);
	pthread_mutex_unlock(&rc->lock);
}

void reconcile_poke(struct reconciler *rc)
{
	if (!rc)
		return;
	pthread_mutex_lock(&rc->lock);
	rc->poked = true;
	pthread_cond_signal(&rc->wake);
	pthread_mutex_unlock(&rc->lock);
}

void reconcile_stop(struct reconciler *rc)
{
	if (!rc)
		return;
	pthread_mutex_lock(&rc->lock);
	rc->stopping = true;
	pthread_cond_signal(&rc->wake);
	pthread_mutex_unlock(&rc->lock);
	pthread_join(rc->thread, NULL);
	pthread_cond_destroy(&rc->wake);
	pthread_mutex_destroy(&rc->lock);
	free(rc);
}
