/* web.c - the unprivileged web process; see web.h. */
#include "web/web.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "labd/app.h"
#include "store/audit.h"
#include "store/db.h"
#include "store/runtimes.h"
#include "store/ttlcache.h"
#include "http/http.h"
#include "proto/ipc.h"
#include "labd/log.h"
#include "runtime/reconcile.h"
#include "http/workers.h"
#include "proxy/upstream.h"
#include "proxy/wsrelay.h"
#include "auth/password.h"
#include "labd/privdrop.h"
#include "store/users.h"

/* How often expired sessions are swept from the store. */
#define MAINTENANCE_SECONDS 60
/* Sizes of the request path's caches of store reads (entries). */
#define IDENTITY_CACHE_ENTRIES 4096
#define RUNTIME_CACHE_ENTRIES 1024

void app_init_policies(struct app *app, const struct labd_config *cfg)
{
	app->cfg = cfg;
	app->password = (struct password_params){cfg->scrypt_n, cfg->scrypt_r, cfg->scrypt_p};
	app->session = (struct session_limits){cfg->session_idle, cfg->session_lifetime};
	app->throttle = (struct throttle_policy){cfg->backoff_after, cfg->backoff_base,
						 cfg->backoff_max, cfg->lockout_failures,
						 cfg->lockout_duration};
	app->throttle_addr = app->throttle;
	app->throttle_addr.lockout_failures = cfg->address_lockout_failures;
}

int web_open_store_as_user(const struct labd_config *cfg, const struct privdrop_user *u,
			   struct db **out)
{
	/* The store holds password hashes and runtime tokens: no bits for others. */
	umask(027);
	if (privdrop_prepare_state_dir(cfg->state_dir, u) < 0)
		return -1;
	/* The store is opened by a relative name from inside the state dir, so the
	 * unprivileged process needs no search permission on the dirs above it. */
	if (chdir(cfg->state_dir) < 0)
		return log_errno("chdir %s", cfg->state_dir);
	if (privdrop_to(u) < 0)
		return -1;
	return db_open("labd.db", out);
}

int web_bootstrap_admin(const struct labd_config *cfg, struct db *db)
{
	struct password_params pp = {cfg->scrypt_n, cfg->scrypt_r, cfg->scrypt_p};
	char password[24], hash[PASSWORD_HASH_MAX];
	struct user existing;
	int admins = users_count_admins(db);
	int rc = users_find_by_name(db, "admin", &existing);

	if (rc < 0 || admins < 0)
		return -1;
	if (admins > 0)
		return 0;
	if (rc == 1)
		return log_error("no administrator exists and the name admin is taken by a user; "
				 "run: labd user add NAME --admin");
	if (password_generate(password) < 0 || password_hash(password, &pp, hash) < 0 ||
	    users_create(db, "admin", USER_ROLE_ADMIN, hash, time(NULL), NULL) != 0)
		return log_error("cannot create the first administrator");
	audit_add(db, time(NULL), NULL, "admin.bootstrap", "admin", NULL, "first start");
	printf("labd: first start: created user \"admin\"\n"
	       "labd: admin password (shown once, change it after logging in): %s\n",
	       password);
	fflush(stdout);
	explicit_bzero(password, sizeof(password));
	return 0;
}

/* Waits for SIGTERM/SIGINT (blocked since the supervisor forked us). Every
 * second it looks for writes by the host CLI (a password reset must end
 * sessions that the caches still hold); now and then it sweeps expired
 * sessions from the store. */
static void serve_until_signal(struct app *app)
{
	sigset_t set;
	struct timespec tick = {1, 0};
	unsigned ticks = 0;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	for (;;) {
		int sig = sigtimedwait(&set, NULL, &tick);
		if (sig == SIGTERM || sig == SIGINT)
			return;
		if (sig >= 0 || errno != EAGAIN)
			continue;
		db_poll_external(app->db);
		if (++ticks % MAINTENANCE_SECONDS == 0)
			sessions_purge_expired(app->db, &app->session, time(NULL));
	}
}

_Noreturn void web_main(const struct labd_config *cfg, const struct privdrop_user *u,
			int listen_fd, int ipc_fd, int web_root_fd)
{
	pid_t supervisor = getppid();
	struct app app = {.web_root_fd = web_root_fd};
	struct workers *httpd;
	struct reconciler *monitor = NULL;
	enum log_level level;

	log_set_tag("labd-web");
	prctl(PR_SET_NAME, "labd-web", 0, 0, 0);
	if (log_level_parse(cfg->log_level, &level) == 0)
		log_set_level(level);
	signal(SIGPIPE, SIG_IGN);
	app_init_policies(&app, cfg);
	if (web_open_store_as_user(cfg, u, &app.db) < 0)
		_exit(1);
	/* Cleared by the credential change, so set only now; then close the race
	 * where the supervisor died before this line. */
	prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
	if (getppid() != supervisor)
		_exit(1);
	app.supervisor = ipc_client_new(ipc_fd);
	if (!app.supervisor || web_bootstrap_admin(cfg, app.db) < 0)
		_exit(1);
	app.proxy.secure = cfg->secure_cookies;
	app.identities = ttlcache_new(IDENTITY_CACHE_ENTRIES, sizeof(struct auth_identity));
	app.runtimes = ttlcache_new(RUNTIME_CACHE_ENTRIES, sizeof(struct runtime));
	if (!app.identities || !app.runtimes) {
		log_error("cannot allocate the request caches");
		_exit(1);
	}
	if (wsrelay_start(&app.proxy.relay) < 0)
		_exit(1);
	httpd = http_start(&app, listen_fd);
	if (!httpd) {
		log_error("cannot start the HTTP server");
		_exit(1);
	}
	if (reconcile_start(&app, &monitor) < 0)
		_exit(1);
	log_info("serving as user %s (pid %d)", u->name, (int)getpid());
	serve_until_signal(&app);
	log_info("shutting down");
	reconcile_stop(monitor);
	/* libmicrohttpd must have no upgraded or suspended connection left. */
	wsrelay_stop(app.proxy.relay);
	workers_stop(httpd);
	upstream_clear();
	ttlcache_free(app.identities);
	ttlcache_free(app.runtimes);
	ipc_client_free(app.supervisor);
	db_close(app.db);
	close(web_root_fd);
	_exit(0);
}
