/* follow.c - the log followers' thread; see follow.h. */
#include "jobs/follow.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jobs/joblog.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "labd/watch.h"
#include "store/jobs.h"

/* What one job's log gives its followers per read, at most. */
#define READ_MAX_BYTES (256 * 1024)
/* A job found over ends its followers only once its log has not grown for
 * this long: the last bytes the supervisor wrote may trail its exit event. */
#define SETTLE_MS 500
/* The wait between rounds while a follower is behind. */
#define CATCH_UP_MS 20
/* How often a job not yet known to be over is looked up in the store (a
 * missed job_exited must not leave its followers waiting for ever). */
#define RECHECK_MS 2000

struct follower {
	struct watch_entry entry; /* whose, and its job (the key) */
	uint64_t offset; /* the next byte it gets */
	const struct follow_sink *sink;
	void *ctx;
	bool done; /* ended or its sink is gone: waits for follow_remove */
	bool fresh; /* added since the last round */
};

/* What the hub knows of one job's log, for a round. */
struct feed {
	int64_t job_id;
	bool over;
	int64_t over_since_ms, size, size_since_ms;
};

struct follow_hub {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	const struct labd_config *cfg;
	struct db *db;
	struct watch_set followers; /* and their caps */
	/* jobs known over (follow_job_ended or the store), by id; bounded */
	int64_t over[64];
	int64_t over_at_ms[64];
	unsigned n_over, next_over;
	int64_t last_check_ms;
	bool stopping;
	pthread_t thread;
	char *buf; /* READ_MAX_BYTES, one round's read */
};

/* The followers in order (newest first), and the job each follows. */
static struct follower *first(const struct follow_hub *h)
{
	struct watch_entry *e = LIST_FIRST(&h->followers.entries);

	return e ? watch_entry_of(e, struct follower, entry) : NULL;
}

static struct follower *next(const struct follower *f)
{
	struct watch_entry *e = LIST_NEXT(&f->entry, link);

	return e ? watch_entry_of(e, struct follower, entry) : NULL;
}

static int64_t job_of(const struct follower *f)
{
	return f->entry.key;
}

static bool is_over_locked(struct follow_hub *h, int64_t job_id, int64_t *since_ms)
{
	for (unsigned i = 0; i < h->n_over; i++)
		if (h->over[i] == job_id) {
			*since_ms = h->over_at_ms[i];
			return true;
		}
	return false;
}

static void mark_over_locked(struct follow_hub *h, int64_t job_id, int64_t now_ms)
{
	int64_t since;

	if (is_over_locked(h, job_id, &since))
		return;
	/* a ring: the oldest entry goes, long after its followers ended */
	h->over[h->next_over] = job_id;
	h->over_at_ms[h->next_over] = now_ms;
	h->next_over = (h->next_over + 1) % 64;
	if (h->n_over < 64)
		h->n_over++;
}

static bool seen_before(const struct follow_hub *h, const struct follower *upto, int64_t job_id);

/* Looks the followed jobs up in the store now and then (once per job). */
static void check_store_locked(struct follow_hub *h, int64_t now_ms, bool force)
{
	if (!force && now_ms - h->last_check_ms < RECHECK_MS)
		return;
	h->last_check_ms = now_ms;
	for (struct follower *f = first(h); f; f = next(f)) {
		struct job j;
		int64_t since;
		int found;
		if (f->done || is_over_locked(h, job_of(f), &since) ||
		    seen_before(h, f, job_of(f)))
			continue;
		found = jobs_find(h->db, job_of(f), &j);
		if (found == 0 || (found > 0 && !jobs_live(&j)))
			mark_over_locked(h, job_of(f), now_ms);
		if (found > 0)
			jobs_row_free(&j);
	}
}

/* Frames data[0..len) (whole lines) as one event for f. */
static int send_lines(struct follower *f, const char *data, size_t len)
{
	char *text = malloc(len + 1);
	size_t n = len;
	int rc;

	if (!text)
		return -ENOMEM;
	memcpy(text, data, len);
	/* the event's lines are its data lines: the last newline ends the
	 * last one rather than starting an empty one */
	if (n > 0 && text[n - 1] == '\n')
		n--;
	if (n > 0 && text[n - 1] == '\r' && len > n)
		n--;
	/* a NUL would end the event's text early */
	for (size_t i = 0; i < n; i++)
		if (text[i] == '\0')
			text[i] = ' ';
	text[n] = '\0';
	rc = f->sink->event(f->ctx, "log", text, f->offset + len);
	free(text);
	return rc;
}

/* Gives f what it can take of data (the log from base, got bytes). */
static void feed_one(struct follower *f, const char *data, uint64_t base, size_t got,
		     bool final)
{
	while (!f->done && f->offset >= base && f->offset < base + got) {
		size_t at = (size_t)(f->offset - base);
		size_t take;
		if (f->sink->room(f->ctx) < JOBLOG_EVENT_MAX_BYTES + 256)
			return;
		take = joblog_cut(data + at, got - at, final, JOBLOG_EVENT_MAX_BYTES);
		if (take == 0)
			return;
		if (send_lines(f, data + at, take) < 0) {
			f->done = true;
			return;
		}
		f->offset += take;
	}
}

/* One round for job_id's followers: one read from the lowest offset of
 * those with room, shared; then "end" where the job is over and drained.
 * Whether a follower is still behind by more than a waiting partial line
 * (a backlog: the next round comes sooner). */
static bool round_job(struct follow_hub *h, int64_t job_id, int64_t now_ms)
{
	bool behind = false;
	char path[4096];
	int64_t size, since_ms = 0;
	uint64_t low = UINT64_MAX;
	bool over = is_over_locked(h, job_id, &since_ms);
	ssize_t got = 0;

	if (jobs_log_path(h->cfg, job_id, path, sizeof(path)) < 0 ||
	    (size = joblog_size(path)) < 0)
		return false;
	for (struct follower *f = first(h); f; f = next(f)) {
		if (job_of(f) != job_id || f->done)
			continue;
		if (f->offset > (uint64_t)size)
			f->offset = (uint64_t)size; /* resumed past the end: nothing more */
		if (f->offset < (uint64_t)size && f->offset < low &&
		    f->sink->room(f->ctx) >= JOBLOG_EVENT_MAX_BYTES + 256)
			low = f->offset;
	}
	if (low != UINT64_MAX && (got = joblog_read(path, low, h->buf, READ_MAX_BYTES)) < 0)
		got = 0;
	for (struct follower *f = first(h); f; f = next(f)) {
		if (job_of(f) != job_id || f->done)
			continue;
		if (got > 0)
			feed_one(f, h->buf, low, (size_t)got,
				 over && low + (uint64_t)got >= (uint64_t)size);
		if (over && f->offset >= (uint64_t)size && now_ms - since_ms >= SETTLE_MS) {
			f->sink->event(f->ctx, "end", "", f->offset);
			f->sink->end(f->ctx);
			f->done = true;
		}
		behind |= !f->done && (uint64_t)size - f->offset > JOBLOG_LINE_MAX_BYTES;
	}
	return behind;
}

/* Whether job_id was already handled this round: an earlier follower of it
 * that is not done (a done one is skipped, so it must not hide the others). */
static bool seen_before(const struct follow_hub *h, const struct follower *upto, int64_t job_id)
{
	for (const struct follower *f = first(h); f != upto; f = next(f))
		if (job_of(f) == job_id && !f->done)
			return true;
	return false;
}

/* A round; whether a follower is behind (see round_job). */
static bool round_all(struct follow_hub *h)
{
	int64_t now_ms = clock_ms();
	bool fresh = false, behind = false;

	for (struct follower *f = first(h); f; f = next(f)) {
		fresh = fresh || f->fresh;
		f->fresh = false;
	}
	check_store_locked(h, now_ms, fresh);
	for (struct follower *f = first(h); f; f = next(f))
		if (!f->done && !seen_before(h, f, job_of(f)))
			behind |= round_job(h, job_of(f), now_ms);
	return behind;
}

static void *run(void *arg)
{
	struct follow_hub *h = arg;

	pthread_mutex_lock(&h->lock);
	while (!h->stopping) {
		struct timespec until;
		/* a follower catching up on a backlog gets its next round soon:
		 * its stream's room, not the period, paces it */
		bool behind = h->followers.n > 0 && round_all(h);
		if (h->followers.n == 0) { /* nobody follows: sleep until a follower comes (it signals) */
			pthread_cond_wait(&h->wake, &h->lock);
			continue;
		}
		clock_deadline(&until, behind ? CATCH_UP_MS : FOLLOW_PERIOD_MS);
		pthread_cond_timedwait(&h->wake, &h->lock, &until);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

struct follow_hub *follow_new(const struct labd_config *cfg, struct db *db,
			      unsigned max_followers, unsigned max_per_user)
{
	struct follow_hub *h = calloc(1, sizeof(*h));
	pthread_condattr_t ca;

	if (!h || !(h->buf = malloc(READ_MAX_BYTES))) {
		log_errno("follow: calloc");
		free(h);
		return NULL;
	}
	h->cfg = cfg;
	h->db = db;
	watch_set_init(&h->followers, max_per_user, max_followers);
	pthread_mutex_init(&h->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&h->thread, NULL, run, h) != 0) {
		log_error("follow: cannot start the log followers' thread");
		pthread_cond_destroy(&h->wake);
		pthread_mutex_destroy(&h->lock);
		free(h->buf);
		free(h);
		return NULL;
	}
	return h;
}

void follow_free(struct follow_hub *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->lock);
	h->stopping = true;
	pthread_cond_signal(&h->wake);
	pthread_mutex_unlock(&h->lock);
	pthread_join(h->thread, NULL);
	for (struct follower *f; (f = first(h));) {
		watch_set_remove(&h->followers, &f->entry);
		free(f);
	}
	pthread_cond_destroy(&h->wake);
	pthread_mutex_destroy(&h->lock);
	free(h->buf);
	free(h);
}

unsigned follow_count_user(struct follow_hub *h, int64_t user_id)
{
	unsigned n;

	pthread_mutex_lock(&h->lock);
	n = watch_set_count(&h->followers, user_id);
	pthread_mutex_unlock(&h->lock);
	return n;
}

int follow_add(struct follow_hub *h, int64_t user_id, int64_t job_id, uint64_t offset,
	       const struct follow_sink *sink, void *ctx, struct follower **out)
{
	struct follower *f = calloc(1, sizeof(*f));
	int rc;

	if (!f)
		return -ENOMEM;
	*f = (struct follower){.offset = offset, .sink = sink, .ctx = ctx, .fresh = true};
	pthread_mutex_lock(&h->lock);
	if ((rc = watch_set_add(&h->followers, &f->entry, user_id, job_id)) == 0) {
		*out = f;
		f = NULL;
		pthread_cond_signal(&h->wake); /* its backlog at once */
	}
	pthread_mutex_unlock(&h->lock);
	free(f);
	return rc;
}

void follow_remove(struct follow_hub *h, struct follower *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&h->lock);
	watch_set_remove(&h->followers, &f->entry);
	pthread_mutex_unlock(&h->lock);
	free(f);
}

void follow_job_ended(struct follow_hub *h, int64_t job_id)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->lock);
	mark_over_locked(h, job_id, clock_ms());
	pthread_cond_signal(&h->wake);
	pthread_mutex_unlock(&h->lock);
}

unsigned follow_count(struct follow_hub *h)
{
	unsigned n;

	pthread_mutex_lock(&h->lock);
	n = h->followers.n;
	pthread_mutex_unlock(&h->lock);
	return n;
}
