/* app.h - (a contract of the web process: forward declarations only, so
 * every layer above store/ may include it) what the web process shares with every request handler: settings,
 * the store, the backend and the web root. Built once by web_main()
 * before the HTTP server starts; read-only afterwards. */
#ifndef LABD_APP_H
#define LABD_APP_H

#include <stdint.h>

struct backend;
struct db;
struct gpus;
struct gpubudget;
struct labd_config;
struct password_params;
struct proxy_context;
struct session_limits;
struct throttle_policy;
struct reconciler;
struct jobs_runner;
struct tuner;
struct runtime;
struct watch;
struct http_streams;
struct ttlcache;
struct observe;
struct oidc;
struct notify;

/* What app->close_connections closes, on an account event: everything of a
 * user (disabled or deleted), a user's cookie-opened ones (password changed),
 * one session's (logged out), one API token's (revoked). */
enum app_close { APP_CLOSE_USER, APP_CLOSE_USER_SESSIONS, APP_CLOSE_SESSION, APP_CLOSE_TOKEN };

struct app {
	const struct labd_config *cfg; /* borrowed for the process lifetime */
	struct db *db;
	struct backend *backend;       /* where sandboxes run (the supervisor) */
	struct reconciler *reconciler; /* runtime timers and reconciliation */
	struct jobs_runner *jobs;      /* the training jobs' thread (jobs/jobs.h); NULL: none */
	struct gpus *gpus;             /* the GPU inventory (sched/gpus.h); NULL: none */
	struct gpubudget *gpu_budget;  /* share budgets (runtime/gpubudget.h); NULL: no shares */
	struct tuner *tuner;           /* the tuning jobs' thread (tuning/tuner.h); NULL: none */
	int web_root_fd; /* O_PATH directory fd of cfg->web_root */
	/* policies derived from cfg by web/, borrowed for the process lifetime */
	const struct password_params *password;
	const struct session_limits *session;
	const struct throttle_policy *throttle;      /* per user name */
	const struct throttle_policy *throttle_addr; /* per client address */
	struct proxy_context *proxy;                 /* waker + WebSocket relay */
	/* The change registries (labd/watch.h), to event streams: each user's
	 * runtime (runtime/watch.h, key user id) and each training job
	 * (jobs/watch.h, key job id). */
	struct watch *watch;
	struct watch *jobs_watch;
	struct http_streams *streams;  /* open event streams: keepalive, shutdown */
	/* Set by web/ so the runtime layer never names the proxy: what must let
	 * go of a runtime that ended (pooled connections, open WebSockets), and
	 * how many of a user's WebSockets carried a kernel message within the
	 * last within_s seconds (idle culling counts them; an open socket or
	 * pings alone do not). */
	void (*on_runtime_ended)(struct app *app, const struct runtime *r);
	int (*active_websockets)(struct app *app, const char *user, int64_t within_s);
	/* Set by web/ so api/ never names the proxy: closes the WebSockets an
	 * account event takes away at once (id: a user, session or token id). */
	void (*close_connections)(struct app *app, enum app_close what, int64_t id);
	struct ttlcache *identities; /* auth_identify's cache; NULL: none */
	struct ttlcache *runtimes;   /* the gate's cache of live runtimes; NULL: none */
	struct ttlcache *home_usage; /* each home's last usage (runtime_home_usage); NULL: none */
	/* training jobs observed (jobs/observe.h: log followers, metrics, samples,
	 * findings); NULL: none */
	struct observe *observe;
	struct oidc *oidc; /* single sign-on (auth/oidc.h); NULL: off */
	struct notify *notify; /* webhook deliveries (notify/notify.h); NULL: none (atomic) */
};

#endif
