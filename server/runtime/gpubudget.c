/* gpubudget.c - the share budget watcher; see gpubudget.h. */
#include "runtime/gpubudget.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "config/config.h"
#include "labd/app.h"
#include "labd/log.h"
#include "runtime/moves.h"
#include "sched/gpus.h"
#include "store/pools.h"

#define ENTRIES_MAX GPUS_DEVICES_MAX
#define ENDED_KEPT 32   /* ended notices kept after their share is let go */
#define GROUP_PIDS_MAX 64

enum budget_state { BUDGET_OK, BUDGET_OVER, BUDGET_ENDED };

/* One held share as the watcher follows it: a new holder, a new entry. */
struct budget_entry {
	unsigned id;
	char user[33];
	int64_t runtime_id, pool_id, job_id;
	enum budget_state state;
	int64_t over_since, ended_at;
	char text[GPUBUDGET_TEXT_MAX];
	bool seen; /* held at this pass */
};

/* Processes to end, decided under the lock, asked for outside it. */
struct ending {
	size_t entry;
	unsigned pids[GROUP_PIDS_MAX];
	size_t n;
};

struct gpubudget {
	struct app *app;
	pthread_mutex_t lock; /* guards entries and ended */
	struct budget_entry entries[ENTRIES_MAX];
	size_t n;
	struct budget_entry ended[ENDED_KEPT]; /* a ring: the last shares whose processes were ended */
	size_t ended_next;
};

int gpubudget_user_of_cgroup(const char *text, char *user, size_t len)
{
	/* each line "hierarchy:controllers:/path"; the path's components are searched */
	for (const char *p = strstr(text, "/labd/"); p; p = strstr(p + 1, "/labd/")) {
		const char *name = p + 6, *end = name + strcspn(name, "/\n");
		const char *dash = end - 13;
		size_t n = 0;
		if (end - name < 15 || *dash != '-')
			continue;
		while (n < 12 && strchr("0123456789abcdef", dash[1 + n]) && dash[1 + n])
			n++;
		if (n != 12 || (size_t)(dash - name) >= len)
			continue;
		memcpy(user, name, (size_t)(dash - name));
		user[dash - name] = '\0';
		return 0;
	}
	return -ENOENT;
}

/* The user whose sandbox runs pid, "" when none (or the process is gone). */
static void user_of_pid(unsigned pid, char *user, size_t len)
{
	char path[40], text[4096];
	FILE *f;
	size_t got;

	user[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%u/cgroup", pid);
	f = fopen(path, "re");
	if (!f)
		return;
	got = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[got] = '\0';
	if (gpubudget_user_of_cgroup(text, user, len) < 0)
		user[0] = '\0';
}

static void gib(int64_t bytes, char *out, size_t len)
{
	snprintf(out, len, "%.1f GiB", (double)bytes / (1024.0 * 1024 * 1024));
}

static void utc(int64_t t, char *out, size_t len)
{
	struct tm tm;
	time_t tt = (time_t)t;

	gmtime_r(&tt, &tm);
	strftime(out, len, "%H:%M:%S UTC", &tm);
}

static struct budget_entry *entry_for(struct gpubudget *b, unsigned id, const struct gpu_hold *h)
{
	for (size_t i = 0; i < b->n; i++) {
		struct budget_entry *e = &b->entries[i];
		if (e->id == id && e->runtime_id == h->runtime_id && e->pool_id == h->job_pool_id)
			return e;
	}
	if (b->n == ENTRIES_MAX)
		return NULL;
	struct budget_entry *e = &b->entries[b->n++];
	*e = (struct budget_entry){.id = id, .runtime_id = h->runtime_id, .pool_id = h->job_pool_id};
	snprintf(e->user, sizeof(e->user), "%s", h->user);
	return e;
}

/* Keeps ended notices, drops the entries of shares no longer held that way. */
static void sweep(struct gpubudget *b)
{
	size_t k = 0;

	for (size_t i = 0; i < b->n; i++) {
		if (b->entries[i].seen) {
			b->entries[k++] = b->entries[i];
			continue;
		}
		if (b->entries[i].state == BUDGET_ENDED) {
			b->ended[b->ended_next] = b->entries[i];
			b->ended_next = (b->ended_next + 1) % ENDED_KEPT;
		}
	}
	b->n = k;
}

/* The share's state after this reading: the warning at the budget, the ending
 * once the grace is over (queued in end), back to ok below it. */
static bool step(struct gpubudget *b, struct budget_entry *e, int64_t used, int64_t budget, int64_t now)
{
	int64_t grace = b->app->cfg->gpu_share_grace_s;
	char u[24], bud[24], at[24], text[GPUBUDGET_TEXT_MAX - 64];

	gib(used, u, sizeof(u));
	gib(budget, bud, sizeof(bud));
	if (used <= budget) {
		if (e->state == BUDGET_OVER) {
			log_info("gpus: %s's share %u is within its budget again", e->user, e->id);
			e->state = BUDGET_OK;
			e->text[0] = '\0';
		}
		e->over_since = 0;
		return false;
	}
	if (e->state == BUDGET_ENDED && now - e->ended_at < grace)
		return false; /* the processes just ended may still be in this reading */
	if (e->over_since == 0) {
		e->over_since = now;
		e->state = BUDGET_OVER;
		utc(now + grace, at, sizeof(at));
		snprintf(text, sizeof(text),
			 "%s in use of %s; its GPU processes are ended at %s unless it drops "
			 "below the budget", u, bud, at);
		snprintf(e->text, sizeof(e->text), "GPU memory over the share's budget: %s", text);
		log_warn("gpus: %s's share %u: %s", e->user, e->id, e->text);
	}
	return now - e->over_since >= grace;
}

static bool on_card_of(const struct gpu_process *p, const struct gpu_info *d, const char *user,
		       const char *owner)
{
	return p->card == d->card && owner[0] && !strcmp(owner, user);
}

struct reading {
	struct gpu_info info[GPUS_DEVICES_MAX];
	struct gpu_hold holds[GPUS_DEVICES_MAX];
	struct gpu_process procs[CONFIG_MAX_GPUS * 64];
	char owners[CONFIG_MAX_GPUS * 64][33];
	struct ending endings[GPUS_DEVICES_MAX];
	int n, n_procs;
	size_t n_endings;
};

/* One share held: what its holder uses of the card (all the holder's shares
 * of that card together: processes name a user and a card, not a share). */
static void watch_share(struct gpubudget *b, struct reading *r, int i, int64_t now)
{
	const struct gpu_info *d = &r->info[i];
	const struct gpu_hold *h = &r->holds[i];
	int64_t used = 0, budget = 0;
	struct ending *end = &r->endings[r->n_endings];

	end->n = 0;
	for (int k = 0; k < r->n_procs; k++)
		if (on_card_of(&r->procs[k], d, h->user, r->owners[k])) {
			used += r->procs[k].bytes > 0 ? r->procs[k].bytes : 0;
			if (end->n < GROUP_PIDS_MAX)
				end->pids[end->n++] = r->procs[k].pid;
		}
	for (int k = 0; k < r->n; k++)
		if (r->info[k].kind == GPUDEV_SHARE && r->info[k].card == d->card &&
		    gpus_hold_busy(&r->holds[k]) && !strcmp(r->holds[k].user, h->user))
			budget += r->info[k].budget_bytes > 0 ? r->info[k].budget_bytes : 0;
	gpus_set_share_used(b->app->gpus, d->id, used);
	struct budget_entry *e = entry_for(b, d->id, h);
	if (!e)
		return;
	e->seen = true;
	if (budget <= 0)
		return; /* a share without a budget is not watched */
	if (step(b, e, used, budget, now) && e->state == BUDGET_OVER && end->n > 0) {
		end->entry = (size_t)(e - b->entries);
		r->n_endings++;
	}
}

/* Asks root to end the processes; the notice says what happened. */
static void end_processes(struct gpubudget *b, struct reading *r, int64_t now)
{
	for (size_t i = 0; i < r->n_endings; i++) {
		struct ending *end = &r->endings[i];
		struct budget_entry e;
		pthread_mutex_lock(&b->lock);
		e = b->entries[end->entry];
		pthread_mutex_unlock(&b->lock);
		int rc = backend_gpu_processes_end(b->app->backend, e.user, e.runtime_id, e.pool_id,
						   end->pids, end->n);
		char at[24], text[GPUBUDGET_TEXT_MAX];
		utc(now, at, sizeof(at));
		if (rc < 0) {
			log_error("gpus: ending %s's GPU processes on share %u failed (%s); asked "
				  "again at the next reading", e.user, e.id, strerror(-rc));
			continue;
		}
		snprintf(text, sizeof(text),
			 "GPU memory over the share's budget for longer than %llds: its GPU "
			 "processes were ended at %s (%d of them)",
			 (long long)b->app->cfg->gpu_share_grace_s, at, rc);
		log_warn("gpus: %s's share %u: %s", e.user, e.id, text);
		/* the notice lives in memory (a restart forgets it, and one grace after
		 * it a share still over is ended anew); the audit log keeps the ending */
		char dev[GPUDEV_TEXT_MAX], detail[GPUBUDGET_TEXT_MAX + 64];
		gpudev_format(e.id, dev, sizeof(dev));
		snprintf(detail, sizeof(detail), "share %s: %s", dev, text);
		runtime_audit(b->app, now, NULL, "gpu.share_ended", e.user, NULL, detail);
		pthread_mutex_lock(&b->lock);
		for (size_t k = 0; k < b->n; k++)
			if (b->entries[k].id == e.id && b->entries[k].runtime_id == e.runtime_id &&
			    b->entries[k].pool_id == e.pool_id) {
				b->entries[k].state = BUDGET_ENDED;
				b->entries[k].ended_at = now;
				b->entries[k].over_since = 0;
				snprintf(b->entries[k].text, sizeof(b->entries[k].text), "%s", text);
			}
		pthread_mutex_unlock(&b->lock);
	}
}

/* The job a pool runs now (0: none), for the job page's notice. */
static int64_t job_of(struct app *app, int64_t pool_id)
{
	struct pool p;

	return pool_id > 0 && pools_find(app->db, pool_id, &p) == 1 ? p.job_id : 0;
}

/* After every reading, on the GPU refresh thread. */
static void pass(void *ctx)
{
	static struct reading r; /* only the refresh thread runs passes */
	struct gpubudget *b = ctx;
	int64_t now = time(NULL);

	r.n = gpus_devices(b->app->gpus, r.info, GPUS_DEVICES_MAX);
	if (gpus_device_holders(b->app->db, b->app->gpus, now, r.holds, (size_t)r.n) != r.n)
		return;
	r.n_procs = (int)gpus_processes(b->app->gpus, r.procs, sizeof(r.procs) / sizeof(r.procs[0]));
	for (int k = 0; k < r.n_procs; k++)
		user_of_pid(r.procs[k].pid, r.owners[k], sizeof(r.owners[k]));
	r.n_endings = 0;
	pthread_mutex_lock(&b->lock);
	for (size_t i = 0; i < b->n; i++)
		b->entries[i].seen = false;
	for (int i = 0; i < r.n; i++) {
		if (r.info[i].kind != GPUDEV_SHARE)
			continue;
		if (!gpus_hold_busy(&r.holds[i])) {
			gpus_set_share_used(b->app->gpus, r.info[i].id, 0);
			continue;
		}
		watch_share(b, &r, i, now);
	}
	sweep(b);
	pthread_mutex_unlock(&b->lock);
	for (int i = 0; i < r.n; i++) /* the job each pool runs, outside the lock */
		if (r.info[i].kind == GPUDEV_SHARE && r.holds[i].job_pool_id > 0) {
			int64_t job = job_of(b->app, r.holds[i].job_pool_id);
			pthread_mutex_lock(&b->lock);
			for (size_t k = 0; k < b->n; k++)
				if (b->entries[k].pool_id == r.holds[i].job_pool_id && job > 0)
					b->entries[k].job_id = job;
			pthread_mutex_unlock(&b->lock);
		}
	end_processes(b, &r, now);
}

static bool any_share(const struct labd_config *cfg)
{
	return cfg->n_gpu_shares > 0;
}

int gpubudget_start(struct app *app, struct gpubudget **out)
{
	struct gpubudget *b;

	*out = NULL;
	if (!app->gpus || !any_share(app->cfg))
		return 0;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->app = app;
	pthread_mutex_init(&b->lock, NULL);
	gpus_on_refresh(app->gpus, pass, b);
	*out = b;
	return 0;
}

void gpubudget_stop(struct app *app, struct gpubudget *b)
{
	if (!b)
		return;
	gpus_on_refresh(app->gpus, NULL, NULL); /* waits for a pass under way */
	pthread_mutex_destroy(&b->lock);
	free(b);
}

static bool copy_text(const struct budget_entry *e, char *out, size_t len)
{
	if (!e->text[0])
		return false;
	snprintf(out, len, "%s", e->text);
	return true;
}

bool gpubudget_notice(struct gpubudget *b, unsigned id, char *out, size_t len)
{
	bool found = false;

	if (!b)
		return false;
	pthread_mutex_lock(&b->lock);
	for (size_t i = 0; i < b->n && !found; i++)
		if (b->entries[i].id == id)
			found = copy_text(&b->entries[i], out, len);
	pthread_mutex_unlock(&b->lock);
	return found;
}

static bool of(const struct budget_entry *e, int64_t runtime_id, int64_t job_id)
{
	return (runtime_id > 0 && e->runtime_id == runtime_id) || (job_id > 0 && e->job_id == job_id);
}

bool gpubudget_notice_of(struct gpubudget *b, int64_t runtime_id, int64_t job_id, char *out,
			 size_t len)
{
	bool found = false;

	if (!b)
		return false;
	pthread_mutex_lock(&b->lock);
	for (size_t i = 0; i < b->n && !found; i++)
		if (of(&b->entries[i], runtime_id, job_id))
			found = copy_text(&b->entries[i], out, len);
	for (size_t i = 0; i < ENDED_KEPT && !found; i++)
		if (b->ended[i].id || b->ended[i].runtime_id || b->ended[i].job_id)
			if (of(&b->ended[i], runtime_id, job_id))
				found = copy_text(&b->ended[i], out, len);
	pthread_mutex_unlock(&b->lock);
	return found;
}
