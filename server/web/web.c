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
#include "auth/auth.h"
#include "labd/clock.h"
#include "config/config.h"
#include "store/throttle.h"
#include "store/sessions.h"
#include "store/audit.h"
#include "store/db.h"
#include "http/http.h"
#include "http/stream.h"
#include "proxy/gate.h"
#include "proxy/proxy.h"
#include "web/routes.h"
#include "backend/backend.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "jobs/jobs.h"
#include "jobs/observe.h"
#include "runtime/poke.h"
#include "runtime/reconcile.h"
#include "runtime/runtime.h"
#include "runtime/watch.h"
#include "sched/gpus.h"
#include "proxy/upstream.h"
#include "http/workers.h"
#include "store/runtimes.h"
#include "store/ttlcache.h"
#include "proxy/wsrelay.h"
#include "auth/password.h"
#include "labd/privdrop.h"
#include "metrics/labd.h"
#include "store/users.h"

/* How often expired sessions are swept from the store. */
#define MAINTENANCE_S 60
/* Sizes of the request path's caches of store reads (entries). */
#define IDENTITY_CACHE_ENTRIES 4096
#define RUNTIME_CACHE_ENTRIES 1024
#define HOME_USAGE_CACHE_ENTRIES 1024
/* Runtime event streams one user may hold open (tabs of the dashboard and
 * of runtime pages); all users together get a quarter of the connections. */
#define EVENT_STREAMS_PER_USER 8
/* How long a login may wait for a hashing slot before 503: a user retries a
 * refused login, but a worker held while waiting serves nobody else. */
#define HASH_QUEUE_WAIT_MS 500

/* The policies the app points at, derived from the configuration. */
struct policies {
	struct password_params password;
	struct session_limits session;
	struct throttle_policy throttle, throttle_addr;
	struct proxy_context proxy;
};

/* At most CPUs - 1 scrypt hashes at once (hash_concurrency overrides), and
 * never on every HTTP worker (password.h). */
static void init_hash_slots(const struct labd_config *cfg)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned cpus = n > 0 ? (unsigned)n : 1;
	unsigned workers = cfg->threads ? cfg->threads : cpus;
	unsigned slots = cfg->hash_concurrency ? cfg->hash_concurrency : cpus > 1 ? cpus - 1 : 1;

	password_slots_init(slots, workers, HASH_QUEUE_WAIT_MS);
}

static void init_policies(struct app *app, struct policies *p, const struct labd_config *cfg)
{
	p->password = (struct password_params){cfg->scrypt_n, cfg->scrypt_r, cfg->scrypt_p};
	p->session = (struct session_limits){cfg->session_idle_s, cfg->session_lifetime_s};
	p->throttle = (struct throttle_policy){cfg->backoff_after, cfg->backoff_base_s,
					       cfg->backoff_max_s, cfg->failure_window_s};
	/* A lower cap per address: behind one shared address (a front proxy not
	 * in trusted_proxies) everyone waits out the same delay. */
	p->throttle_addr = p->throttle;
	p->throttle_addr.backoff_max_s = cfg->address_backoff_max_s;
	p->proxy.secure = cfg->secure_cookies;
	init_hash_slots(cfg);
	*app = (struct app){.cfg = cfg, .web_root_fd = app->web_root_fd, .password = &p->password,
			    .session = &p->session, .throttle = &p->throttle,
			    .throttle_addr = &p->throttle_addr, .proxy = &p->proxy};
}

int web_open_store_as_user(const struct labd_config *cfg, const struct privdrop_user *u,
			   struct db **out)
{
	/* The store holds password hashes and runtime tokens: no bits for others. */
	umask(027);
	if (privdrop_prepare_state_dir(cfg->state_dir, u) < 0)
		return -1;
	/* The store is opened by a relative name from inside the state dir, so the
	 * unprivileged process needs no search permission on the dirs above it;
	 * it lives in db/, the one directory there that labd owns. */
	if (chdir(cfg->state_dir) < 0)
		return log_errno("chdir %s", cfg->state_dir);
	if (privdrop_to(u) < 0)
		return -1;
	return db_open("db/labd.db", out);
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
	if (audit_add(db, time(NULL), NULL, "admin.bootstrap", "admin", NULL, "first start") < 0)
		log_error("audit: admin.bootstrap not recorded");
	printf("labd: first start: created user \"admin\"\n"
	       "labd: admin password (shown once, change it after logging in): %s\n",
	       password);
	fflush(stdout);
	explicit_bzero(password, sizeof(password));
	return 0;
}

/* Whether a request for the route table carries a live session or token: a
 * body is held in memory before the route runs, and only up to
 * max_unauthenticated_body for anyone else (the identity is cached, so the
 * route's own auth_identify costs nothing more). */
static bool has_credentials(struct http_request *req)
{
	return auth_identify(req) == 0 && http_identity(req)->kind != AUTH_NONE;
}

/* Who serves what: runtimes' pages are streamed through the proxy's gate,
 * everything else goes through the route table. */
static const struct http_handler handlers[] = {
	{.prefix = GATE_PREFIX, .streaming = true, .begin = gate_begin, .upload = proxy_upload,
	 .respond = proxy_respond, .release = proxy_release},
	{.prefix = "/", .on_request = routes_dispatch, .authenticated = has_credentials},
};

/* The proxy lets go of a runtime that ended: pooled upstream connections
 * and the user's open WebSockets (closed with a close frame). */
static void forget_runtime(struct app *app, const struct runtime *r)
{
	char socket_path[RUNTIME_ENDPOINT_MAX];

	if (runtime_socket_path(r, socket_path, sizeof(socket_path)) == 0)
		upstream_forget(socket_path);
	wsrelay_close_owner(app->proxy->relay, r->user_name);
}

static int active_websockets(struct app *app, const char *user, int64_t within_s)
{
	return wsrelay_active(app->proxy->relay, user, clock_ms() - within_s * 1000);
}

static void close_connections(struct app *app, enum app_close what, int64_t id)
{
	static const enum wsrelay_scope scope[] = {
		[APP_CLOSE_USER] = WSRELAY_USER,
		[APP_CLOSE_USER_SESSIONS] = WSRELAY_USER_SESSIONS,
		[APP_CLOSE_SESSION] = WSRELAY_SESSION,
		[APP_CLOSE_TOKEN] = WSRELAY_TOKEN,
	};
	int n = wsrelay_close(app->proxy->relay, scope[what], id);
	int m = proxy_cancel(scope[what], id);

	if (n > 0 || m > 0)
		log_info("closing %d websocket(s) and %d proxied request(s) after an account event",
			 n, m);
}

/* The channel to the supervisor is (re)established: runtimes and job
 * sandboxes both reconcile with its list. */
static void on_connected(void *ctx)
{
	struct app *app = ctx;

	reconcile_wake(app->reconciler);
	jobs_connected(app);
}

/* The registry of runtime changes and the event streams that carry them.
 * LABD_EVENT_KEEPALIVE_MS (tests only) shortens the 15 s keepalive. */
static int start_events(struct app *app)
{
	const char *env = getenv("LABD_EVENT_KEEPALIVE_MS");
	uint64_t keepalive_ms = HTTP_STREAM_KEEPALIVE_MS;
	unsigned max_streams = app->cfg->max_connections / 4 ? app->cfg->max_connections / 4 : 1;

	if (env && parse_uint(env, 1, 3600 * 1000, &keepalive_ms) < 0)
		return log_error("LABD_EVENT_KEEPALIVE_MS=%s: not 1..3600000", env);
	app->watch = runtime_watch_new(app->db, EVENT_STREAMS_PER_USER, max_streams);
	app->streams = http_streams_new((unsigned)keepalive_ms, max_streams);
	return app->watch && app->streams ? 0 : -1;
}

/* Waits for SIGTERM/SIGINT (blocked since the supervisor forked us). Every
 * second it looks for writes by the host CLI (a password reset must end
 * sessions that the caches still hold); now and then it sweeps expired
 * sessions from the store. With LABD_FAULT_BAD_MESSAGE set (tests only),
 * SIGUSR1 sends that text (each line a message) to the supervisor, as a
 * compromised web process could. */
static void send_bad_messages(struct app *app, const char *bad)
{
	char one[4096];

	/* one message per line, so a test can try several in one go */
	for (const char *p = bad; *p;) {
		size_t n = strcspn(p, "\n");
		snprintf(one, sizeof(one), "%.*s", (int)(n < sizeof(one) ? n : sizeof(one) - 1), p);
		log_warn("fault injection: sending %s to the supervisor", one);
		backend_local_send_raw(app->backend, one);
		p += n + (p[n] == '\n');
	}
}

static void serve_until_signal(struct app *app)
{
	const char *bad = getenv("LABD_FAULT_BAD_MESSAGE");
	sigset_t set;
	struct timespec tick = {1, 0};
	unsigned ticks = 0;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (bad)
		sigaddset(&set, SIGUSR1); /* blocked in every thread by web_main */
	for (;;) {
		int sig = sigtimedwait(&set, NULL, &tick);
		if (sig == SIGTERM || sig == SIGINT)
			return;
		if (sig == SIGUSR1 && bad)
			send_bad_messages(app, bad);
		if (sig >= 0 || errno != EAGAIN)
			continue;
		db_poll_external(app->db);
		if (++ticks % MAINTENANCE_S == 0)
			sessions_purge_expired(app->db, app->session, time(NULL));
	}
}

_Noreturn void web_main(const struct labd_config *cfg, const struct privdrop_user *u,
			int listen_fd, int supervisor_fd, int web_root_fd)
{
	pid_t supervisor = getppid();
	struct app app = {.web_root_fd = web_root_fd};
	struct workers *httpd;
	struct backend_events events;
	struct policies policies;
	enum log_level level;

	log_set_tag("labd-web");
	prctl(PR_SET_NAME, "labd-web", 0, 0, 0);
	if (log_level_parse(cfg->log_level, &level) == 0)
		log_set_level(level);
	signal(SIGPIPE, SIG_IGN);
	if (getenv("LABD_FAULT_BAD_MESSAGE")) {
		sigset_t usr1;
		sigemptyset(&usr1);
		sigaddset(&usr1, SIGUSR1);
		sigprocmask(SIG_BLOCK, &usr1, NULL); /* before any thread starts */
	}
	metrics_process_started();
	init_policies(&app, &policies, cfg);
	if (web_open_store_as_user(cfg, u, &app.db) < 0)
		_exit(1);
	/* Cleared by the credential change, so set only now; then close the race
	 * where the supervisor died before this line. */
	prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
	if (getppid() != supervisor)
		_exit(1);
	if (web_bootstrap_admin(cfg, app.db) < 0)
		_exit(1);
	app.on_runtime_ended = forget_runtime;
	app.active_websockets = active_websockets;
	app.close_connections = close_connections;
	app.identities = ttlcache_new(IDENTITY_CACHE_ENTRIES, sizeof(struct auth_identity));
	app.runtimes = ttlcache_new(RUNTIME_CACHE_ENTRIES, sizeof(struct runtime));
	app.home_usage = ttlcache_new(HOME_USAGE_CACHE_ENTRIES, sizeof(struct backend_home));
	if (!app.identities || !app.runtimes || !app.home_usage) {
		log_error("cannot allocate the request caches");
		_exit(1);
	}
	if (wsrelay_start(&app.proxy->relay, cfg->websocket_idle_timeout_s * 1000) < 0 || start_events(&app) < 0)
		_exit(1);
	/* The GPU pool before the reconciler (whose passes run the queue). */
	if (gpus_new(cfg, &app.gpus) < 0) {
		log_error("cannot set up the GPU pool");
		_exit(1);
	}
	/* The backend before the reconciler (which lists its sandboxes), both
	 * before the first request (which may start a runtime). */
	runtime_events_init(&events, &app);
	jobs_events_init(&events, &app);
	events.connected = on_connected;
	app.backend = backend_local_new(supervisor_fd, &events);
	if (!app.backend || reconcile_start(&app, &app.reconciler) < 0 || observe_init(&app) < 0 ||
	    jobs_runner_start(&app, &app.jobs) < 0)
		_exit(1);
	httpd = http_start(&app, listen_fd, handlers, sizeof(handlers) / sizeof(handlers[0]));
	if (!httpd) {
		log_error("cannot start the HTTP server");
		_exit(1);
	}
	log_info("serving as user %s (pid %d)", u->name, (int)getpid());
	serve_until_signal(&app);
	log_info("shutting down");
	jobs_runner_stop(__atomic_exchange_n(&app.jobs, NULL, __ATOMIC_SEQ_CST));
	reconcile_stop(app.reconciler);
	/* backend events may still come until backend_free: keep them off the
	 * relay that is about to go */
	__atomic_store_n(&app.on_runtime_ended, NULL, __ATOMIC_SEQ_CST);
	/* libmicrohttpd must have no upgraded or suspended connection left. */
	http_streams_close_all(app.streams);
	wsrelay_stop(app.proxy->relay);
	workers_stop(httpd);
	http_streams_free(app.streams);
	upstream_clear();
	ttlcache_free(app.identities);
	ttlcache_free(app.runtimes);
	ttlcache_free(app.home_usage);
	backend_free(app.backend);
	gpus_free(app.gpus); /* after the reconciler, which takes its lock */
	observe_free(&app);  /* after backend_free: events call its hooks */
	runtime_watch_free(app.watch); /* backend events notify until backend_free */
	db_close(app.db);
	close(web_root_fd);
	_exit(0);
}
