/* watch.c - the keyed registry of subscribers and its capped set; see
 * labd/watch.h. */
#include "labd/watch.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "labd/log.h"

void watch_set_init(struct watch_set *s, unsigned max_per_user, unsigned max_total)
{
	LIST_INIT(&s->entries);
	s->n = 0;
	s->max_per_user = max_per_user;
	s->max_total = max_total;
}

unsigned watch_set_count(const struct watch_set *s, int64_t user_id)
{
	const struct watch_entry *e;
	unsigned n = 0;

	LIST_FOREACH(e, &s->entries, link)
		n += e->user_id == user_id;
	return n;
}

bool watch_set_follows(const struct watch_set *s, int64_t key)
{
	const struct watch_entry *e;

	LIST_FOREACH(e, &s->entries, link)
		if (e->key == key)
			return true;
	return false;
}

int watch_set_add(struct watch_set *s, struct watch_entry *e, int64_t user_id, int64_t key)
{
	if (s->n >= s->max_total)
		return -ENFILE;
	if (watch_set_count(s, user_id) >= s->max_per_user)
		return -EUSERS;
	e->user_id = user_id;
	e->key = key;
	LIST_INSERT_HEAD(&s->entries, e, link);
	s->n++;
	return 0;
}

void watch_set_remove(struct watch_set *s, struct watch_entry *e)
{
	LIST_REMOVE(e, link);
	s->n--;
}

struct watcher {
	struct watch_entry entry; /* key: the row it follows */
	watch_fn fn;
	void *ctx;
	bool heard_any;
	struct watch_digest heard;
};

struct watch {
	pthread_mutex_t lock; /* the set, the row buffer, and every callback */
	const struct watch_source *src;
	void *src_ctx;
	struct watch_set set;
	void *row; /* src->row_size bytes: one read at a time, under the lock */
};

struct watch *watch_new(const struct watch_source *src, void *ctx, unsigned max_per_user,
			unsigned max_total)
{
	struct watch *w = calloc(1, sizeof(*w));

	if (!w || !(w->row = calloc(1, src->row_size))) {
		log_errno("%s watch: calloc", src->name);
		free(w);
		return NULL;
	}
	pthread_mutex_init(&w->lock, NULL);
	w->src = src;
	w->src_ctx = ctx;
	watch_set_init(&w->set, max_per_user, max_total);
	return w;
}

void watch_free(struct watch *w)
{
	struct watch_entry *e;

	if (!w)
		return;
	while ((e = LIST_FIRST(&w->set.entries))) {
		watch_set_remove(&w->set, e);
		free(watch_entry_of(e, struct watcher, entry));
	}
	pthread_mutex_destroy(&w->lock);
	free(w->row);
	free(w);
}

unsigned watch_count(struct watch *w, int64_t user_id)
{
	unsigned n;

	pthread_mutex_lock(&w->lock);
	n = watch_set_count(&w->set, user_id);
	pthread_mutex_unlock(&w->lock);
	return n;
}

/* Tells s about row (NULL: none) unless it heard exactly that last. */
static void deliver(const struct watch *w, struct watcher *s, const void *row)
{
	struct watch_digest now = {{0}};

	w->src->digest(row, &now);
	if (s->heard_any && memcmp(&now, &s->heard, sizeof(now)) == 0)
		return;
	s->heard_any = true;
	s->heard = now;
	s->fn(s->ctx, row);
}

/* Reads key's row into w->row under the lock: 1, 0 (none) or < 0. */
static int read_row(struct watch *w, int64_t key)
{
	memset(w->row, 0, w->src->row_size);
	return w->src->read(w->src_ctx, key, w->row);
}

static void release_row(struct watch *w, int found)
{
	if (found > 0 && w->src->release)
		w->src->release(w->row);
}

int watch_subscribe(struct watch *w, int64_t user_id, int64_t key, watch_fn fn, void *ctx,
		    struct watcher **out)
{
	struct watcher *s = calloc(1, sizeof(*s));
	int rc, found = 0;

	if (!s)
		return -ENOMEM;
	s->fn = fn;
	s->ctx = ctx;
	pthread_mutex_lock(&w->lock);
	if ((rc = watch_set_add(&w->set, &s->entry, user_id, key)) < 0)
		goto out;
	/* Read under the lock, as notify does: the first state a subscriber
	 * hears is never older than one a notify already sent. */
	found = read_row(w, key);
	rc = found < 0 ? -EIO : found == 0 && w->src->row_required ? -ENOENT : 0;
	if (rc < 0) {
		watch_set_remove(&w->set, &s->entry);
		goto out;
	}
	deliver(w, s, found ? w->row : NULL);
	*out = s;
	s = NULL;
out:
	release_row(w, found);
	pthread_mutex_unlock(&w->lock);
	free(s);
	return rc;
}

void watch_unsubscribe(struct watch *w, struct watcher *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&w->lock);
	watch_set_remove(&w->set, &s->entry);
	pthread_mutex_unlock(&w->lock);
	free(s);
}

void watch_notify(struct watch *w, int64_t key)
{
	struct watch_entry *e;
	int found;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	if (!watch_set_follows(&w->set, key))
		goto out;
	if ((found = read_row(w, key)) < 0) {
		log_error("%s watch: cannot read row %lld", w->src->name, (long long)key);
		goto out;
	}
	LIST_FOREACH(e, &w->set.entries, link)
		if (e->key == key)
			deliver(w, watch_entry_of(e, struct watcher, entry), found ? w->row : NULL);
	release_row(w, found);
out:
	pthread_mutex_unlock(&w->lock);
}
