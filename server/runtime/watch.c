/* watch.c - the runtime-change registry; see watch.h. */
#include "runtime/watch.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "labd/log.h"
#include "store/runtimes.h"

struct runtime_watcher {
	int64_t user_id;
	runtime_watch_fn fn;
	void *ctx;
	/* what the subscriber last heard: none yet, no runtime, or (id, state,
	 * and while queued its place: position and estimate) */
	bool heard, heard_none;
	int64_t heard_id, heard_estimate;
	enum runtime_state heard_state;
	int heard_position;
	struct runtime_watcher *prev, *next;
};

struct runtime_watch {
	pthread_mutex_t lock; /* the list, and every callback */
	struct db *db;
	unsigned max_per_user, max_total, n;
	struct runtime_watcher *head;
};

struct runtime_watch *runtime_watch_new(struct db *db, unsigned max_per_user, unsigned max_total)
{
	struct runtime_watch *w = calloc(1, sizeof(*w));

	if (!w) {
		log_errno("runtime watch: calloc");
		return NULL;
	}
	pthread_mutex_init(&w->lock, NULL);
	w->db = db;
	w->max_per_user = max_per_user;
	w->max_total = max_total;
	return w;
}

void runtime_watch_free(struct runtime_watch *w)
{
	if (!w)
		return;
	while (w->head) {
		struct runtime_watcher *next = w->head->next;
		free(w->head);
		w->head = next;
	}
	pthread_mutex_destroy(&w->lock);
	free(w);
}

static unsigned count_locked(const struct runtime_watch *w, int64_t user_id)
{
	unsigned n = 0;

	for (const struct runtime_watcher *s = w->head; s; s = s->next)
		n += s->user_id == user_id;
	return n;
}

unsigned runtime_watch_count(struct runtime_watch *w, int64_t user_id)
{
	unsigned n;

	pthread_mutex_lock(&w->lock);
	n = count_locked(w, user_id);
	pthread_mutex_unlock(&w->lock);
	return n;
}

/* Tells s about r (NULL: no runtime) unless it heard exactly that last. */
static void deliver(struct runtime_watcher *s, const struct runtime *r)
{
	if (s->heard && (r ? !s->heard_none && s->heard_id == r->id && s->heard_state == r->state &&
				     s->heard_position == r->queue_position &&
				     s->heard_estimate == r->queue_estimate_at
			   : s->heard_none))
		return;
	s->heard = true;
	s->heard_none = !r;
	if (r) {
		s->heard_id = r->id;
		s->heard_state = r->state;
		s->heard_position = r->queue_position;
		s->heard_estimate = r->queue_estimate_at;
	}
	s->fn(s->ctx, r);
}

int runtime_watch_subscribe(struct runtime_watch *w, int64_t user_id, runtime_watch_fn fn,
			    void *ctx, struct runtime_watcher **out)
{
	struct runtime_watcher *s = NULL;
	struct runtime r;
	int rc, found;

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
	if ((found = runtimes_latest(w->db, user_id, &r)) < 0) {
		rc = -EIO;
		goto out;
	}
	if (!(s = calloc(1, sizeof(*s)))) {
		rc = -ENOMEM;
		goto out;
	}
	*s = (struct runtime_watcher){.user_id = user_id, .fn = fn, .ctx = ctx, .next = w->head};
	if (w->head)
		w->head->prev = s;
	w->head = s;
	w->n++;
	deliver(s, found ? &r : NULL);
	*out = s;
	rc = 0;
out:
	pthread_mutex_unlock(&w->lock);
	return rc;
}

void runtime_watch_unsubscribe(struct runtime_watch *w, struct runtime_watcher *s)
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

void runtime_watch_notify(struct runtime_watch *w, int64_t user_id)
{
	struct runtime r;
	int found;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	if (count_locked(w, user_id) == 0)
		goto out;
	if ((found = runtimes_latest(w->db, user_id, &r)) < 0) {
		log_error("runtime watch: cannot read the runtime of user %lld",
			  (long long)user_id);
		goto out;
	}
	for (struct runtime_watcher *s = w->head; s; s = s->next)
		if (s->user_id == user_id)
			deliver(s, found ? &r : NULL);
out:
	pthread_mutex_unlock(&w->lock);
}
