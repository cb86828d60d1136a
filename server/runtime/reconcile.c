/* monitor.c - see monitor.h. */
#include "runtime/reconcile.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "labd/app.h"
#include "store/audit.h"
#include "proto/ipc.h"
#include "runtime/jupyter.h"
#include "labd/log.h"
#include "proxy/gate.h"
#include "store/runtimes.h"
#include "proxy/upstream.h"
#include "proxy/wsrelay.h"

/* A start request is in flight for this long before a missing sandbox counts. */
#define START_GRACE 10

struct reconciler {
	struct app *app;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stopping;
};

struct pass {
	struct app *app;
	json_t *boxes; /* the supervisor's runtime_list, or NULL when it did not answer */
	int64_t now;
	int starting; /* runtimes still starting after this pass */
};

static json_t *find_box(json_t *boxes, const char *user)
{
	json_t *b;
	size_t i;
	json_array_foreach(boxes, i, b) {
		if (strcmp(json_string_value(json_object_get(b, "user")) ?: "", user) == 0)
			return b;
	}
	return NULL;
}

static void end_runtime(struct pass *p, const struct runtime *r, bool failed, const char *reason)
{
	char socket_path[UPSTREAM_PATH_MAX];

	if (runtimes_set_state(p->app->db, r->id, failed ? RUNTIME_FAILED : RUNTIME_STOPPED, reason,
			       p->now) != 1)
		return;
	gate_socket_path(r->user_name, socket_path, sizeof(socket_path));
	upstream_forget(socket_path);
	wsrelay_close_owner(p->app->proxy.relay, r->user_name);
	if (audit_add(p->app->db, p->now, NULL, failed ? "runtime.failed" : "runtime.end",
		      r->user_name, NULL, reason) < 0)
		log_error("audit: end of the runtime of %s not recorded", r->user_name);
	log_info("runtime of %s %s: %s", r->user_name, failed ? "failed" : "ended", reason);
}

static void check_starting(struct pass *p, const struct runtime *r)
{
	char socket_path[UPSTREAM_PATH_MAX], body[512], reason[RUNTIME_REASON_MAX];
	int status;

	gate_socket_path(r->user_name, socket_path, sizeof(socket_path));
	if (jupyter_request(socket_path, "GET", r->user_name, "api/status", r->token, 1000, &status,
			    body, sizeof(body)) == 0 &&
	    status == 200) {
		if (runtimes_set_state(p->app->db, r->id, RUNTIME_RUNNING, NULL, p->now) == 1) {
			if (audit_add(p->app->db, p->now, NULL, "runtime.ready", r->user_name, NULL,
				      runtimes_kind_name(r->kind)) < 0)
				log_error("audit: runtime.ready of %s not recorded", r->user_name);
			log_info("runtime of %s is ready after %lld s", r->user_name,
				 (long long)(p->now - r->created_at));
		}
		return;
	}
	if (p->now - r->created_at > p->app->cfg->start_timeout) {
		snprintf(reason, sizeof(reason), "jupyter did not answer within %lld seconds",
			 (long long)p->app->cfg->start_timeout);
		api_runtime_stop(p->app, r, reason);
		end_runtime(p, r, true, reason);
	}
}

/* Active = a recent request, an open WebSocket or a busy kernel. */
static void check_idle(struct pass *p, const struct runtime *r)
{
	char socket_path[UPSTREAM_PATH_MAX], reason[RUNTIME_REASON_MAX];
	int64_t limit = p->app->cfg->idle_timeout;

	/* last_activity lags by up to the touch interval: never cull early */
	if (limit <= 0 || p->now - r->last_activity < limit + RUNTIME_TOUCH_INTERVAL)
		return;
	gate_socket_path(r->user_name, socket_path, sizeof(socket_path));
	if (wsrelay_count(p->app->proxy.relay, r->user_name) > 0 ||
	    jupyter_kernels_busy(socket_path, r->user_name, r->token) == 1) {
		runtimes_touch(p->app->db, r->id, p->now);
		return;
	}
	snprintf(reason, sizeof(reason), "idle for %lld seconds", (long long)limit);
	if (api_runtime_stop(p->app, r, reason) == 0)
		if (audit_add(p->app->db, p->now, NULL, "runtime.cull", r->user_name, NULL, reason) < 0)
			log_error("audit: runtime.cull of %s not recorded", r->user_name);
}

static int reconcile(const struct runtime *r, void *ctx)
{
	struct pass *p = ctx;
	json_t *box = find_box(p->boxes, r->user_name);
	const char *state = json_string_value(json_object_get(box, "state"));
	const char *reason = json_string_value(json_object_get(box, "reason"));

	if (!box) {
		if (p->now - r->created_at > START_GRACE)
			end_runtime(p, r, true, "the runtime's sandbox is gone");
		return 0;
	}
	if (strcmp(state, "ended") == 0) {
		end_runtime(p, r, json_is_true(json_object_get(box, "failed")) ||
					  r->state == RUNTIME_STARTING,
			    reason && reason[0] ? reason : "the runtime ended");
		return 0;
	}
	if (strcmp(state, "stopping") == 0 && r->state != RUNTIME_STOPPING) {
		runtimes_set_state(p->app->db, r->id, RUNTIME_STOPPING, reason, p->now);
		return 0;
	}
	/* A stop the supervisor never heard of (it restarted meanwhile): ask again. */
	if (strcmp(state, "running") == 0 && r->state == RUNTIME_STOPPING) {
		api_runtime_stop(p->app, r, r->reason[0] ? r->reason : "stopped");
		return 0;
	}
	if (r->state == RUNTIME_STARTING) {
		check_starting(p, r);
		p->starting++; /* counted even if it became ready: harmless */
	}
	else if (r->state == RUNTIME_RUNNING)
		check_idle(p, r);
	return 0;
}

int reconcile_pass(struct app *app)
{
	struct pass p = {.app = app, .now = time(NULL)};
	json_t *reply = NULL;

	if (ipc_client_call(app->supervisor, "runtime_list", NULL, &reply) < 0)
		return 0; /* decide nothing without the supervisor's word */
	p.boxes = json_object_get(reply, "runtimes");
	if (json_is_array(p.boxes))
		runtimes_each_live(app->db, reconcile, &p);
	json_decref(reply);
	return p.starting;
}

static void *monitor_loop(void *arg)
{
	struct reconciler *m = arg;
	struct timespec until;

	pthread_mutex_lock(&m->lock);
	while (!m->stopping) {
		pthread_mutex_unlock(&m->lock);
		/* Poll a starting Jupyter often: readiness is what the user waits on. */
		long wait_ns = reconcile_pass(m->app) > 0 ? 100000000L : 1000000000L;
		pthread_mutex_lock(&m->lock);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += wait_ns;
		until.tv_sec += until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		if (!m->stopping)
			pthread_cond_timedwait(&m->wake, &m->lock, &until);
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

int reconcile_start(struct app *app, struct reconciler **out)
{
	struct reconciler *m = calloc(1, sizeof(*m));

	if (!m)
		return log_errno("monitor: calloc");
	m->app = app;
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->wake, NULL);
	if (pthread_create(&m->thread, NULL, monitor_loop, m) != 0) {
		free(m);
		return log_error("monitor: cannot start its thread");
	}
	*out = m;
	return 0;
}

void reconcile_stop(struct reconciler *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->stopping = true;
	pthread_cond_signal(&m->wake);
	pthread_mutex_unlock(&m->lock);
	pthread_join(m->thread, NULL);
	pthread_cond_destroy(&m->wake);
	pthread_mutex_destroy(&m->lock);
	free(m);
}
