/* watch.c - the job-change registry; see watch.h. */
#include "jobs/watch.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "labd/log.h"
#include "store/jobs.h"

/* What a subscriber last heard of its job. */
struct heard {
	bool gone;
	enum job_status status;
	enum job_secondary secondary;
	int attempt, exit_code;
	int64_t pool_id, reused_by;
	char warm_status[12];
};

struct jobs_watcher {
	int64_t user_id, job_id;
	jobs_watch_fn fn;
	void *ctx;
	bool heard_any;
	struct heard heard;
	struct jobs_watcher *prev, *next;
};

struct jobs_watch {
	pthread_mutex_t lock; /* the list, and every callback */
	struct db *db;
	unsigned max_per_user, max_total, n;
	struct jobs_watcher *head;
};

struct jobs_watch *jobs_watch_new(struct db *db, unsigned max_per_user, unsigned max_total)
{
	struct jobs_watch *w = calloc(1, sizeof(*w));

	if (!w) {
		log_errno("jobs watch: calloc");
		return NULL;
	}
	pthread_mutex_init(&w->lock, NULL);
	w->db = db;
	w->max_per_user = max_per_user;
	w->max_total = max_total;
	return w;
}

void jobs_watch_free(struct jobs_watch *w)
{
	if (!w)
		return;
	while (w->head) {
		struct jobs_watcher *next = w->head->next;
		free(w->head);
		w->head = next;
	}
	pthread_mutex_destroy(&w->lock);
	free(w);
}

static unsigned count_locked(const struct jobs_watch *w, int64_t user_id)
{
	unsigned n = 0;

	for (const struct jobs_watcher *s = w->head; s; s = s->next)
		n += s->user_id == user_id;
	return n;
}

unsigned jobs_watch_count(struct jobs_watch *w, int64_t user_id)
{
	unsigned n;

	pthread_mutex_lock(&w->lock);
	n = count_locked(w, user_id);
	pthread_mutex_unlock(&w->lock);
	return n;
}

static void heard_of(struct heard *h, const struct job *j)
{
	memset(h, 0, sizeof(*h));
	h->gone = !j;
	if (!j)
		return;
	h->status = j->status;
	h->secondary = j->secondary;
	h->attempt = j->attempt;
	h->exit_code = j->exit_code;
	h->pool_id = j->pool_id;
	h->reused_by = j->reused_by;
	memcpy(h->warm_status, j->warm_status, sizeof(h->warm_status));
}

/* Tells s about j unless it heard exactly that last. */
static void deliver(struct jobs_watcher *s, const struct job *j)
{
	struct heard now;

	heard_of(&now, j);
	if (s->heard_any && memcmp(&now, &s->heard, sizeof(now)) == 0)
		return;
	s->heard_any = true;
	s->heard = now;
	s->fn(s->ctx, j);
}

int jobs_watch_subscribe(struct jobs_watch *w, int64_t user_id, int64_t job_id, jobs_watch_fn fn,
			 void *ctx, struct jobs_watcher **out)
{
	struct jobs_watcher *s = NULL;
	struct job j;
	int rc, found = 0;

	pthread_mutex_lock(&w->lock);
	if (w->n >= w->max_total) {
		rc = -ENFILE;
		goto out;
	}
	if (count_locked(w, user_id) >= w->max_per_user) {
		rc = -EUSERS;
		goto out;
	}
	/* Read under the lock, as notify does: the first state a subscriber
	 * hears is never older than one a notify already sent. */
	if ((found = jobs_find(w->db, job_id, &j)) <= 0) {
		rc = found < 0 ? -EIO : -ENOENT;
		goto out;
	}
	if (!(s = calloc(1, sizeof(*s)))) {
		rc = -ENOMEM;
		goto out;
	}
	*s = (struct jobs_watcher){
		.user_id = user_id, .job_id = job_id, .fn = fn, .ctx = ctx, .next = w->head};
	if (w->head)
		w->head->prev = s;
	w->head = s;
	w->n++;
	deliver(s, &j);
	*out = s;
	rc = 0;
out:
	if (found > 0)
		jobs_row_free(&j);
	pthread_mutex_unlock(&w->lock);
	return rc;
}

void jobs_watch_unsubscribe(struct jobs_watch *w, struct jobs_watcher *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&w->lock);
	if (s->prev)
		s->prev->next = s->next;
	else
		w->head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	w->n--;
	pthread_mutex_unlock(&w->lock);
	free(s);
}

void jobs_watch_changed(struct jobs_watch *w, int64_t job_id)
{
	struct jobs_watcher *s;
	struct job j;
	int found;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	for (s = w->head; s && s->job_id != job_id; s = s->next)
		;
	if (!s)
		goto out;
	if ((found = jobs_find(w->db, job_id, &j)) < 0) {
		log_error("jobs watch: cannot read job %lld", (long long)job_id);
		goto out;
	}
	for (s = w->head; s; s = s->next)
		if (s->job_id == job_id)
			deliver(s, found ? &j : NULL);
	if (found)
		jobs_row_free(&j);
out:
	pthread_mutex_unlock(&w->lock);
}
