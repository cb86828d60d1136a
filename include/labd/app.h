/* app.h - what the web process shares with every request handler: settings,
 * the store, the backend and the web root. Built once by web_main()
 * before the HTTP server starts; read-only afterwards. */
#ifndef LABD_APP_H
#define LABD_APP_H

#include "config/config.h"
#include "auth/password.h"
#include "proxy/proxy.h"
#include "store/sessions.h"
#include "store/throttle.h"

struct backend;
struct db;
struct reconciler;
struct runtime;

struct app {
	const struct labd_config *cfg; /* borrowed for the process lifetime */
	struct db *db;
	struct backend *backend;       /* where sandboxes run (the supervisor) */
	struct reconciler *reconciler; /* runtime timers and reconciliation */
	int web_root_fd; /* O_PATH directory fd of cfg->web_root */
	struct password_params password;
	struct session_limits session;
	struct throttle_policy throttle;      /* per user name */
	struct throttle_policy throttle_addr; /* per client address */
	struct proxy_context proxy;           /* waker + WebSocket relay */
	/* Set by web/ so the runtime layer never names the proxy: what must let
	 * go of a runtime that ended (pooled connections, open WebSockets), and
	 * how many WebSockets a user has open (idle culling counts them). */
	void (*on_runtime_ended)(struct app *app, const struct runtime *r);
	int (*open_websockets)(struct app *app, const char *user);
};

/* Derives the policy structs from cfg. */
void app_init_policies(struct app *app, const struct labd_config *cfg);

#endif
