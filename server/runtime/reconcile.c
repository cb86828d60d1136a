/* reconcile.c - the runtime reconciler's pass on a ticker; see reconcile.h. */
#include "runtime/reconcile.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "config/config.h"
#include "labd/app.h"
#include "labd/buf.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "labd/ticker.h"
#include "notify/notify.h"
#include "runtime/gpuqueue.h"
#include "runtime/jupyter.h"
#include "runtime/moves.h"
#include "runtime/poke.h"
#include "runtime/runtime.h"
#include "store/audit.h"
#include "store/db.h"
#include "store/ledger.h"
#include "store/runtimes.h"

/* While a runtime is live, a total reconciliation at least this often even
 * when nothing asked for it. */
#define SAFETY_NET_S 300

/* The reconciler: its handle (app->reconciler) first, then what the pass keeps. */
struct reconcile_state {
	struct reconciler handle;
	struct app *app;
	time_t last_full, last_beat;
	bool confirmed; /* a total reconciliation matched the rows since this process started */
	uint64_t full_spells; /* db_full_spells caught up on by a total reconciliation */
};

/* The clock_ms() time when the wall clock reads epoch second at (a row's
 * times are epoch seconds; the ticker's are monotonic). A time already past
 * (a heartbeat or reconciliation that failed) is retried in a second, not
 * in a busy loop. */
static long long mono_at(int64_t at)
{
	long long due = clock_ms_at(at * 1000), now = clock_ms();

	return due > now ? due : now + 1000;
}

static int reconcile_all(struct app *app);

/* A start in flight for this long before a missing sandbox counts. */
#define START_GRACE_S 10

/* The first runtime this web process made (0: none yet). Row ids are taken above
 * every row there is, so a starting row below it was asked for by a web process
 * before this one: a sandbox the list lacks will never come (its request died with
 * that process's channel, or the supervisor ended it unfinished when labd stopped),
 * and there is no grace to wait out. By id, not by the clock: a restart within the
 * second the start was asked for would pass for a start of this process's own and
 * wait for the next full pass (minutes in Starting, billed for nothing). */
static int64_t first_own_runtime;

void reconcile_own_runtime(int64_t id)
{
	int64_t none = 0;

	__atomic_compare_exchange_n(&first_own_runtime, &none, id, false, __ATOMIC_SEQ_CST,
				    __ATOMIC_SEQ_CST);
}

/* A start this web process asked for, within the grace: the list may not have it yet. */
static bool may_be_unlisted(const struct runtime *r, int64_t now)
{
	int64_t own = __atomic_load_n(&first_own_runtime, __ATOMIC_SEQ_CST);

	return r->state == RUNTIME_STARTING && now - r->created_at <= START_GRACE_S && own &&
	       r->id >= own;
}

static long long earlier(long long a, long long b)
{
	if (a == TICKER_IDLE)
		return b;
	return b == TICKER_IDLE || a < b ? a : b;
}

/* The rows to act on now, copied so no store lock is held over Jupyter
 * calls, and when the next one falls due. */
struct due {
	struct runtime r[64];
	int n;
	bool live; /* any live row at all */
	int64_t now, next; /* next: epoch second of the next start timeout or cull; 0 none */
	const struct labd_config *cfg;
	struct app *app;
};

static void due_at(struct due *d, int64_t at)
{
	if (!d->next || at < d->next)
		d->next = at;
}

static int collect_due(const struct runtime *r, void *ctx)
{
	struct due *d = ctx;
	/* idle since its last activity or since it became ready, the later (a
	 * start slower than idle_timeout is not idleness); last_activity lags by
	 * up to the touch interval: never cull early */
	int64_t since = r->last_activity > r->ready_at ? r->last_activity : r->ready_at;
	int64_t begun = r->created_at, placed;
	/* a start that waits for a Slurm allocation has not begun yet */
	if (r->state == RUNTIME_STARTING &&
	    runtime_backend_placed_at(d->app, r->id, &placed) == 0)
		begun = placed ? placed : d->now;
	int64_t late_at = begun + d->cfg->start_timeout_s + 1;
	int64_t idle_at = since + d->cfg->idle_timeout_s + RUNTIME_TOUCH_INTERVAL_S;
	bool start_late = r->state == RUNTIME_STARTING && d->now >= late_at;
	bool cull = r->state == RUNTIME_RUNNING && d->cfg->idle_timeout_s > 0;
	bool idle = cull && d->now >= idle_at;

	d->live = true;
	if ((start_late || idle) && d->n < 64)
		d->r[d->n++] = *r;
	else if (r->state == RUNTIME_STARTING)
		due_at(d, late_at);
	else if (cull)
		due_at(d, idle_at);
	return 0;
}

static void fail_start(struct app *app, const struct runtime *r)
{
	char reason[RUNTIME_REASON_MAX];

	snprintf(reason, sizeof(reason), "jupyter did not answer within %lld seconds",
		 (long long)app->cfg->start_timeout_s);
	if (runtime_stop(app, r, reason) == 0) {
		runtimes_set_state(app->db, r->id, RUNTIME_FAILED, reason, time(NULL));
		runtime_moved(app, r->user_id);
		notify_runtime_ended(app, r->user_id, r->id, runtimes_kind_name(r->kind), true,
				     reason);
	}
}

/* Active = a recent request, an open WebSocket or a busy kernel. */
static void cull_if_idle(struct app *app, const struct runtime *r, int64_t now)
{
	char socket_path[RUNTIME_ENDPOINT_MAX], reason[RUNTIME_REASON_MAX];

	if ((app->active_websockets &&
	     app->active_websockets(app, r->user_name, app->cfg->idle_timeout_s) > 0) ||
	    (runtime_socket_path(r, socket_path, sizeof(socket_path)) == 0 &&
	     jupyter_kernels_busy_as(socket_path, (uid_t)(app->cfg->uid_base + r->user_id),
				     r->user_name, r->token) == 1)) {
		runtimes_touch(app->db, r->id, now);
		return;
	}
	snprintf(reason, sizeof(reason), "idle for %lld seconds", (long long)app->cfg->idle_timeout_s);
	if (runtime_stop(app, r, reason) == 0)
		runtime_audit(app, now, NULL, "runtime.cull", r->user_name, NULL, reason);
}

/* The timers (start timeout, idle culling) over one read of the live rows:
 * whether any row is live, and *next the epoch second the next falls due
 * (0: none). A row acted on is looked at again on the next pass. */
static bool timers(struct app *app, int64_t *next)
{
	struct due d = {.now = time(NULL), .cfg = app->cfg, .app = app};

	if (runtimes_each_live(app->db, collect_due, &d) < 0) {
		*next = d.now + 1; /* the store will answer again: not a reason to sleep */
		return true;
	}
	for (int i = 0; i < d.n; i++) {
		if (d.r[i].state == RUNTIME_STARTING)
			fail_start(app, &d.r[i]);
		else
			cull_if_idle(app, &d.r[i], d.now);
	}
	*next = d.n ? d.now + 1 : d.next;
	return d.live;
}

/* Advances the open ledger entries every LEDGER_HEARTBEAT_S, but only once a
 * total reconciliation has matched the rows to the backend's sandboxes since
 * this process started: after a crash, a runtime is billed on only when its
 * sandbox is known to have lived on. */
static void heartbeat(struct reconcile_state *run)
{
	time_t now = time(NULL);

	if (!run->confirmed || now - run->last_beat < LEDGER_HEARTBEAT_S)
		return;
	audit_flush(run->app->db); /* entries a full disk held back, once it has room */
	if (ledger_heartbeat(run->app->db, now) < 0) {
		log_error("ledger: heartbeat not recorded; retrying");
		/* on a full disk, at the usual pace: the next one that is written
		 * bills the whole time, and a retry each second only fills the log */
		if (db_full(run->app->db))
			run->last_beat = now;
	} else {
		run->last_beat = now;
		notify_quota_pass(run->app); /* quota.low for whoever passed the mark */
	}
}

/* A full state disk refuses the writes of events that happen anyway (a
 * sandbox's end): once it has room again, the rows are matched to the
 * sandboxes at once, not at the safety net. */
static bool room_again(struct reconcile_state *run)
{
	uint64_t spells = db_full_spells(run->app->db);

	if (spells == run->full_spells)
		return false;
	/* db_room: one statvfs, which also ends db_full once the room is back */
	if (db_full(run->app->db) && db_room(run->app->db) < 0)
		return false;
	run->full_spells = spells;
	return true;
}

/* One pass: a total reconciliation when asked for (or the safety net is
 * due), the timers, the GPU queue, the ledger's heartbeat. Due again at the
 * earliest of what is pending; with nothing live, never until poked. */
static long long pass(void *arg)
{
	struct reconcile_state *run = arg;
	struct app *app = run->app;
	int64_t next = 0;
	bool live;

	if ((reconcile_take_wanted(&run->handle) || room_again(run) ||
	     time(NULL) - run->last_full >= SAFETY_NET_S) &&
	    reconcile_all(app) == 0) {
		run->last_full = time(NULL);
		run->confirmed = true;
	}
	live = timers(app, &next);
	long long due = gpuqueue_tick(app);
	if (!live)
		return due;
	heartbeat(run);
	if (next)
		due = earlier(due, mono_at(next));
	due = earlier(due, mono_at(run->last_beat + LEDGER_HEARTBEAT_S));
	return earlier(due, mono_at(run->last_full + SAFETY_NET_S));
}

int reconcile_start(struct app *app, struct reconciler **out)
{
	struct reconcile_state *run = calloc(1, sizeof(*run));
	struct ticker *t;

	if (!run)
		return log_errno("reconcile: calloc");
	/* recovery: entries whose runtime ended while no process watched */
	int closed = ledger_recover(app->db);
	if (closed < 0) {
		free(run);
		return log_error("ledger: cannot recover the open entries");
	}
	if (closed > 0)
		log_warn("ledger: closed %d entries at their last heartbeat", closed);
	run->app = app;
	run->last_full = time(NULL);
	run->handle.wanted = true; /* the channel may have come up before the ticker */
	if (ticker_start("reconcile", pass, run, &t) < 0) {
		free(run);
		return -1;
	}
	__atomic_store_n(&run->handle.ticker, t, __ATOMIC_RELEASE);
	__atomic_store_n(out, &run->handle, __ATOMIC_RELEASE);
	/* a poke before the handle was set was lost: one more pass sees its move */
	ticker_poke(t);
	return 0;
}

void reconcile_stop(struct reconciler *rc)
{
	if (!rc)
		return;
	ticker_stop(rc->ticker);
	free((struct reconcile_state *)((char *)rc - offsetof(struct reconcile_state, handle)));
}

/* ---- total reconciliation ---- */


/* The live rows, copied out of the walk (the backend is not called under the
 * store's lock), in one bounded buffer: past ROWS_MAX live runtimes nothing is
 * decided, rather than deciding on part of them. */
#define ROWS_MAX 4096

struct live_rows {
	struct buf b;
	const struct runtime *r; /* b's data once the walk is done */
	size_t n;
};

static int collect_row(const struct runtime *r, void *ctx)
{
	struct live_rows *rows = ctx;
	return buf_add(&rows->b, r, sizeof(*r)) < 0; /* non-zero stops the walk */
}

static int collect_rows(struct app *app, struct live_rows *rows)
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
		return; /* no sandbox until it leaves the queue (gpuqueue_tick) */
	if (!s || !same_runtime(s, r)) {
		if (!may_be_unlisted(r, now))
			runtime_end(app, r, true, "the runtime's sandbox is gone");
		return;
	}
	if (strcmp(s->state, "ended") == 0) {
		runtime_end(app, r, s->failed || r->state == RUNTIME_STARTING,
			    s->reason[0] ? s->reason : "the runtime ended");
	} else if (strcmp(s->state, "stopping") == 0 && r->state != RUNTIME_STOPPING) {
		runtimes_set_state(app->db, r->id, RUNTIME_STOPPING, s->reason, now);
		runtime_moved(app, r->user_id);
	} else if (strcmp(s->state, "running") == 0 && r->state == RUNTIME_STOPPING) {
		/* a stop the supervisor never heard of (it restarted meanwhile) */
		backend_stop(app->backend, r->user_name, r->id, r->reason[0] ? r->reason : "stopped");
	} else if (s->ready && r->state == RUNTIME_STARTING) {
		runtime_mark_ready(app, r, NULL); /* the ready event came before we listened */
	}
}

/* A sandbox that no live row accounts for is stopped. */
static void stop_strays(struct app *app, const struct live_rows *rows, const struct backend_sandbox *s,
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

/* One total reconciliation with the backend's list; 0, or -1 when the
 * backend did not answer or the live rows could not be read (nothing is
 * decided then). */
static int reconcile_all(struct app *app)
{
	struct backend_sandbox *s = NULL;
	struct live_rows rows;
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
