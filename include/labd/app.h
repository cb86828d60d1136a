/* app.h - what the web process shares with every request handler: settings,
 * the store, the supervisor channel and the web root. Built once by web_main()
 * before the HTTP server starts; read-only afterwards. */
#ifndef LABD_APP_H
#define LABD_APP_H

#include "config/config.h"
#include "auth/password.h"
#include "proxy/proxy.h"
#include "store/sessions.h"
#include "store/throttle.h"

struct db;
struct ipc_client;
struct ttlcache;

struct app {
	const struct labd_config *cfg; /* borrowed for the process lifetime */
	struct db *db;
	struct ipc_client *supervisor;
	int web_root_fd; /* O_PATH directory fd of cfg->web_root */
	struct password_params password;
	struct session_limits session;
	struct throttle_policy throttle;      /* per user name */
	struct throttle_policy throttle_addr; /* per client address */
	struct proxy_context proxy;           /* WebSocket relay */
	struct ttlcache *identities;          /* auth_identify's cache; NULL: none */
	struct ttlcache *runtimes;            /* the gate's cache of runtimes; NULL: none */
};

/* Derives the policy structs from cfg. */
void app_init_policies(struct app *app, const struct labd_config *cfg);

#endif
