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
#include "api/api.h"
#include "api/job_shell_relay.h"
#include "auth/auth.h"
#include "labd/clock.h"
#include "config/config.h"
#include "store/throttle.h"
#include "store/sessions.h"
#include "store/audit.h"
#include "store/db.h"
#include "http/http.h"
#include "http/offload.h"
#include "http/stream.h"
#include "proxy/gate.h"
#include "proxy/proxy.h"
#include "web/dbwatch.h"
#include "web/routes.h"
#include "backend/backend.h"
#include "backend/slurm.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "jobs/jobs.h"
#include "jobs/observe.h"
#include "jobs/watch.h"
#include "runtime/gpubudget.h"
#include "runtime/poke.h"
#include "runtime/reconcile.h"
#include "runtime/runtime.h"
#include "runtime/watch.h"
#include "sched/gpus.h"
#include "proxy/upstream.h"
#include "http/workers.h"
#include "store/runtimes.h"
#include "store/ttlcache.h"
#include "auth/oidc.h"
#include "proxy/wsrelay.h"
#include "auth/password.h"
#include "labd/privdrop.h"
#include "labd/ticker.h"
#include "labd/watch.h"
#include "metrics/labd.h"
#include "store/users.h"
#include "jobs/retention.h"
#include "notify/notify.h"
#include "tuning/tuner.h"

/* How often expired sessions are swept from the store. */
#define MAINTENANCE_S 60
/* Sizes of the request path's caches of store reads (entries). */
#define IDENTITY_CACHE_ENTRIES 4096
#define RUNTIME_CACHE_ENTRIES 1024
#define HOME_USAGE_CACHE_ENTRIES 1024
/* Runtime event streams one user may hold open (tabs of the dashboard and
 * of runtime pages); all users together get a quarter of the connections. */
#define EVENT_STREAMS_PER_USER 8
/* A training job's status streams (GET /jobs/{id}/events): per user and in all. */
#define JOB_EVENT_STREAMS_PER_USER 16
#define JOB_EVENT_STREAMS_MAX 1024
/* How long a login may wait for a hashing slot before 503, and how many may
 * wait for each slot: a user retries a refused login, and a turn further back
 * would come after the wait anyway. */
#define HASH_QUEUE_WAIT_MS 500
#define HASH_QUEUE_PER_SLOT 8

/* The policies the app points at, derived from the configuration. */
struct policies {
	struct password_params password;
	struct session_limits session;
	struct throttle_policy throttle, throttle_addr;
	struct proxy_context proxy;
};

/* At most CPUs - 1 scrypt hashes at once (hash_concurrency overrides), on
 * threads of their own (routes.c), each slot with at most HASH_QUEUE_PER_SLOT
 * logins waiting for it (password.h). */
static void init_hash_slots(const struct labd_config *cfg)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned cpus = n > 0 ? (unsigned)n : 1;
	unsigned slots = cfg->hash_concurrency ? cfg->hash_concurrency : cpus > 1 ? cpus - 1 : 1;

	password_slots_init(slots, slots * HASH_QUEUE_PER_SLOT, HASH_QUEUE_WAIT_MS);
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
	int k = job_shell_relay_close(what, id); /* shells into jobs (api/job_shell.c) */

	if (n > 0 || m > 0 || k > 0)
		log_info("closing %d websocket(s), %d proxied request(s) and %d job shell(s) after "
			 "an account event", n, m, k);
}

/* The channel to the supervisor is (re)established: runtimes and job
 * sandboxes both reconcile with its list. */
static void on_connected(void *ctx)
{
	struct app *app = ctx;

	reconcile_wake(app);
	jobs_connected(app);
}

/* Everything the web process holds, for the parts below. */
struct web {
	struct app app;
	struct policies policies;
	const struct privdrop_user *user;
	int listen_fd, supervisor_fd;
	pid_t supervisor;
	struct backend_events events;
	struct ticker *maintenance;
	struct dbwatch *dbwatch; /* NULL: the store's directory is polled instead */
	struct workers *httpd;
};

/* ---- the parts of the web process, started in order, stopped in reverse ---- */

static int start_store(struct web *w)
{
	if (web_open_store_as_user(w->app.cfg, w->user, &w->app.db) < 0)
		return -1;
	/* Cleared by the credential change, so set only now; then close the race
	 * where the supervisor died before this line. */
	prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
	if (getppid() != w->supervisor)
		return -1;
	return web_bootstrap_admin(w->app.cfg, w->app.db);
}

static void stop_store(struct web *w)
{
	db_close(w->app.db);
}

static int start_caches(struct web *w)
{
	w->app.identities = ttlcache_new(IDENTITY_CACHE_ENTRIES, sizeof(struct auth_identity));
	w->app.runtimes = ttlcache_new(RUNTIME_CACHE_ENTRIES, sizeof(struct runtime));
	w->app.home_usage = ttlcache_new(HOME_USAGE_CACHE_ENTRIES, sizeof(struct backend_home));
	return w->app.identities && w->app.runtimes && w->app.home_usage ? 0 : -1;
}

static void stop_caches(struct web *w)
{
	ttlcache_free(w->app.identities);
	ttlcache_free(w->app.runtimes);
	ttlcache_free(w->app.home_usage);
}

/* Single sign-on: its first discovery runs in a thread of its own. */
static int start_oidc(struct web *w)
{
	bool failed;

	w->app.oidc = oidc_new(w->app.cfg, &failed);
	return failed ? -1 : 0;
}

static void stop_oidc(struct web *w)
{
	oidc_free(w->app.oidc);
	w->app.oidc = NULL;
}

/* The registries of runtime and job changes and the event streams that carry
 * them. LABD_EVENT_KEEPALIVE_MS (tests only) shortens the 15 s keepalive. The
 * registries outlive the backend (its events notify until backend_free). */
static int start_events(struct web *w)
{
	struct app *app = &w->app;
	const char *env = getenv("LABD_EVENT_KEEPALIVE_MS");
	uint64_t keepalive_ms = HTTP_STREAM_KEEPALIVE_MS;
	unsigned max_streams = app->cfg->max_connections / 4 ? app->cfg->max_connections / 4 : 1;

	if (env && parse_uint(env, 1, 3600 * 1000, &keepalive_ms) < 0)
		return log_error("LABD_EVENT_KEEPALIVE_MS=%s: not 1..3600000", env);
	app->watch = runtime_watch_new(app->db, EVENT_STREAMS_PER_USER, max_streams);
	app->jobs_watch = jobs_watch_new(app->db, JOB_EVENT_STREAMS_PER_USER, JOB_EVENT_STREAMS_MAX);
	app->streams = http_streams_new((unsigned)keepalive_ms, max_streams);
	return app->watch && app->jobs_watch && app->streams ? 0 : -1;
}

static void stop_events(struct web *w)
{
	http_streams_free(w->app.streams);
	watch_free(w->app.watch);
	watch_free(w->app.jobs_watch);
}

/* The GPU pool, before the reconciler (whose passes run the queue) and the
 * backend (whose samples read it); freed after both. */
static int start_gpus(struct web *w)
{
	return gpus_new(w->app.cfg, &w->app.gpus) < 0 ? -1 : 0;
}

static void stop_gpus(struct web *w)
{
	gpus_free(w->app.gpus);
}

/* Observation of jobs: its hooks are the backend's events', so it goes after. */
static int start_observe(struct web *w)
{
	return observe_init(&w->app);
}

static void stop_observe(struct web *w)
{
	observe_free(&w->app);
}

/* The channel to the supervisor, before the reconcilers (which list its
 * sandboxes) and the first request (which may start a runtime: the
 * reconciler's first pass, just after, sees it). */
static int start_backend(struct web *w)
{
	runtime_events_init(&w->events, &w->app);
	jobs_events_init(&w->events, &w->app);
	w->events.connected = on_connected;
	/* [backend] kind = slurm: sandboxes on the cluster's nodes; this host's own
	 * supervisor still restarts this process but hosts none */
	if (strcmp(w->app.cfg->backend_kind, "slurm") == 0)
		w->app.backend = backend_slurm_new(w->app.cfg, &w->events);
	else
		w->app.backend = backend_local_new(w->supervisor_fd, &w->events);
	return w->app.backend ? 0 : -1;
}

static void stop_backend(struct web *w)
{
	backend_free(w->app.backend);
}

/* The share budget watcher asks the backend to end processes: after it,
 * stopped before it. */
static int start_gpu_budget(struct web *w)
{
	return gpubudget_start(&w->app, &w->app.gpu_budget) < 0 ? -1 : 0;
}

static void stop_gpu_budget(struct web *w)
{
	gpubudget_stop(&w->app, w->app.gpu_budget);
	w->app.gpu_budget = NULL;
}

static int start_reconciler(struct web *w)
{
	return reconcile_start(&w->app, &w->app.reconciler);
}

static void stop_reconciler(struct web *w)
{
	reconcile_stop(__atomic_exchange_n(&w->app.reconciler, NULL, __ATOMIC_SEQ_CST));
}

static int start_jobs(struct web *w)
{
	return jobs_runner_start(&w->app, &w->app.jobs);
}

static void stop_jobs(struct web *w)
{
	jobs_runner_stop(__atomic_exchange_n(&w->app.jobs, NULL, __ATOMIC_SEQ_CST));
}

/* Tuning jobs' searches (tuning/tuner.h): they submit and stop jobs, so
 * they start after the jobs pass and stop before it. */
static int start_tuner(struct web *w)
{
	return tuner_start(&w->app);
}

static void stop_tuner(struct web *w)
{
	tuner_stop(&w->app);
}

/* The host CLI's writes (a password reset must end sessions that the caches
 * still hold) are heard when they happen (dbwatch.h: a write in the store's
 * directory pokes the maintenance ticker), or looked for every second when
 * the directory cannot be watched; expired sessions are swept from the store
 * every MAINTENANCE_S, ended jobs by the retention sweep (jobs/retention.h)
 * every [jobs] retention_sweep, and courses end at their groups' expires_at
 * (api/groups_end.c; a change to a group is a store write, which pokes). */
#define CLI_WRITES_EVERY_MS 1000

static long long maintenance_pass(void *arg)
{
	struct web *w = arg;
	static long long next_purge_ms;
	long long retention_ms, courses_ms, due_ms;

	db_poll_external(w->app.db);
	if (clock_ms() >= next_purge_ms) {
		sessions_purge_expired(w->app.db, w->app.session, time(NULL));
		next_purge_ms = clock_ms() + MAINTENANCE_S * 1000LL;
	}
	/* what ended jobs keep: [jobs] retention_sweep */
	retention_ms = jobs_retention_pass(&w->app);
	/* courses that end: api/groups_end.c */
	courses_ms = api_groups_end_pass(&w->app);
	if (courses_ms < retention_ms)
		retention_ms = courses_ms;
	due_ms = __atomic_load_n(&w->dbwatch, __ATOMIC_ACQUIRE) ? next_purge_ms
							       : clock_ms() + CLI_WRITES_EVERY_MS;
	return retention_ms < due_ms ? retention_ms : due_ms;
}

static void store_written(void *arg)
{
	struct web *w = arg;

	ticker_poke(__atomic_load_n(&w->maintenance, __ATOMIC_ACQUIRE));
}

static int start_maintenance(struct web *w)
{
	struct ticker *t;
	struct dbwatch *dw;

	if (ticker_start("maintenance", maintenance_pass, w, &t) < 0)
		return -1;
	__atomic_store_n(&w->maintenance, t, __ATOMIC_RELEASE);
	/* the store is db/labd.db below the working directory (the state dir) */
	if (dbwatch_start("db", store_written, w, &dw) == 0) {
		__atomic_store_n(&w->dbwatch, dw, __ATOMIC_RELEASE);
		ticker_poke(t); /* its next due time is the purge's now */
	}
	return 0;
}

static void stop_maintenance(struct web *w)
{
	dbwatch_stop(w->dbwatch);
	ticker_stop(w->maintenance);
}

/* The WebSocket relay, the proxy's hooks into it and the HTTP server. On
 * the way down libmicrohttpd must have no upgraded or suspended connection
 * left, and backend events (which may come until backend_free) are kept off
 * the relay that goes. */
static int start_http(struct web *w)
{
	struct app *app = &w->app;

	if (wsrelay_start(&app->proxy->relay, app->cfg->websocket_idle_timeout_s * 1000) < 0)
		return -1;
	app->active_websockets = active_websockets;
	app->close_connections = close_connections;
	__atomic_store_n(&app->on_runtime_ended, forget_runtime, __ATOMIC_SEQ_CST);
	w->httpd = http_start(app, w->listen_fd, handlers, sizeof(handlers) / sizeof(handlers[0]));
	if (w->httpd)
		return 0;
	__atomic_store_n(&app->on_runtime_ended, NULL, __ATOMIC_SEQ_CST);
	wsrelay_stop(app->proxy->relay);
	return -1;
}

static void stop_http(struct web *w)
{
	__atomic_store_n(&w->app.on_runtime_ended, NULL, __ATOMIC_SEQ_CST);
	offload_drain(); /* their connections must be resumed before the daemons stop */
	http_streams_close_all(w->app.streams);
	wsrelay_stop(w->app.proxy->relay);
	job_shell_relay_stop_all();
	workers_stop(w->httpd);
	upstream_clear();
}

static int start_notify(struct web *w)
{
	return notify_start(&w->app);
}

static void stop_notify(struct web *w)
{
	notify_stop(&w->app);
}

static const struct part {
	const char *name;
	int (*start)(struct web *w);
	void (*stop)(struct web *w);
} parts[] = {
	{"store", start_store, stop_store},
	{"caches", start_caches, stop_caches},
	/* webhook deliveries: stopped after everything that queues events */
	{"notify", start_notify, stop_notify},
	{"oidc", start_oidc, stop_oidc},
	{"events", start_events, stop_events},
	{"gpus", start_gpus, stop_gpus},
	{"observe", start_observe, stop_observe},
	{"backend", start_backend, stop_backend},
	{"gpu budgets", start_gpu_budget, stop_gpu_budget},
	{"http", start_http, stop_http},
	/* the tickers last, so that they stop first: nothing is dispatched
	 * while the supervisor ends sandboxes on a shutdown */
	{"maintenance", start_maintenance, stop_maintenance},
	{"reconciler", start_reconciler, stop_reconciler},
	{"jobs", start_jobs, stop_jobs}, /* stops before the supervisor's shutdown events follow */
	{"tuning", start_tuner, stop_tuner},
};
#define N_PARTS (sizeof(parts) / sizeof(parts[0]))

/* Stops the first n parts, the last first. */
static void stop_parts(struct web *w, size_t n)
{
	while (n-- > 0)
		parts[n].stop(w);
}

/* Starts every part in order; the number started (N_PARTS: all). A part that
 * fails is named, and those before it are stopped again. */
static size_t start_parts(struct web *w)
{
	for (size_t i = 0; i < N_PARTS; i++) {
		if (parts[i].start(w) == 0)
			continue;
		log_error("web process: part \"%s\" did not start", parts[i].name);
		stop_parts(w, i);
		return i;
	}
	return N_PARTS;
}

/* With LABD_FAULT_BAD_MESSAGE set (tests only), SIGUSR1 sends that text
 * (each line a message) to the supervisor, as a compromised web process
 * could. */
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

/* Waits, untimed, for SIGTERM/SIGINT (blocked since the supervisor forked
 * us); the timed work is the parts' tickers'. */
static void serve_until_signal(struct app *app)
{
	const char *bad = getenv("LABD_FAULT_BAD_MESSAGE");
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (bad)
		sigaddset(&set, SIGUSR1); /* blocked in every thread by web_main */
	for (;;) {
		int sig = sigwaitinfo(&set, NULL);
		if (sig == SIGTERM || sig == SIGINT)
			return;
		if (sig == SIGUSR1 && bad)
			send_bad_messages(app, bad);
	}
}

/* The process itself: names, log level, signals; before any thread starts. */
static void process_setup(const struct labd_config *cfg)
{
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
		sigprocmask(SIG_BLOCK, &usr1, NULL);
	}
	metrics_process_started();
}

_Noreturn void web_main(const struct labd_config *cfg, const struct privdrop_user *u,
			int listen_fd, int supervisor_fd, int web_root_fd)
{
	static struct web w; /* large (the policies); lives as long as the process */

	w = (struct web){.user = u, .listen_fd = listen_fd, .supervisor_fd = supervisor_fd,
			 .supervisor = getppid(), .app.web_root_fd = web_root_fd};
	process_setup(cfg);
	init_policies(&w.app, &w.policies, cfg);
	if (start_parts(&w) < N_PARTS)
		_exit(1);
	log_info("serving as user %s (pid %d)", u->name, (int)getpid());
	serve_until_signal(&w.app);
	log_info("shutting down");
	stop_parts(&w, N_PARTS);
	close(web_root_fd);
	_exit(0);
}
