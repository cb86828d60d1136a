/* app.h - (a contract of the web process: forward declarations only, so
 * every layer above store/ may include it) what the web process shares with every request handler: settings,
 * the store, the backend and the web root. Built once by web_main()
 * before the HTTP server starts; read-only afterwards. */
#ifndef LABD_APP_H
#define LABD_APP_H

struct backend;
struct db;
struct labd_config;
struct password_params;
struct proxy_context;
struct session_limits;
struct throttle_policy;
struct reconciler;
struct runtime;
struct runtime_watch;
struct http_streams;
struct ttlcache;

struct app {
	const struct labd_config *cfg; /* borrowed for the process lifetime */
	struct db *db;
	struct backend *backend;       /* where sandboxes run (the supervisor) */
	struct reconciler *reconciler; /* runtime timers and reconciliation */
	int web_root_fd; /* O_PATH directory fd of cfg->web_root */
	/* policies derived from cfg by web/, borrowed for the process lifetime */
	const struct password_params *password;
	const struct session_limits *session;
	const struct throttle_policy *throttle;      /* per user name */
	const struct throttle_policy *throttle_addr; /* per client address */
	struct proxy_context *proxy;                 /* waker + WebSocket relay */
	struct runtime_watch *watch;   /* runtime state changes, to event streams */
	struct http_streams *streams;  /* open event streams: keepalive, shutdown */
	/* Set by web/ so the runtime layer never names the proxy: what must let
	 * go of a runtime that ended (pooled connections, open WebSockets), and
	 * how many WebSockets a user has open (idle culling counts them). */
	void (*on_runtime_ended)(struct app *app, const struct runtime *r);
	int (*open_websockets)(struct app *app, const char *user);
	struct ttlcache *identities; /* auth_identify's cache; NULL: none */
	struct ttlcache *runtimes;   /* the gate's cache of live runtimes; NULL: none */
};

#endif
