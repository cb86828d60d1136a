/* watch.h - a keyed registry of subscribers: who wants to hear when a row
 * changes (a user's runtime, a training job), and the capped set of
 * subscriptions it and the job-log followers keep.
 *
 * A set (struct watch_set) is a list of entries, each counted against a
 * user and following a key (a row id), with at most max_per_user entries of
 * one user and max_total in all. It takes no lock: its owner's lock guards
 * it. Owners embed a struct watch_entry in their own subscriber and find it
 * again with watch_entry_of.
 *
 * A registry (struct watch) is such a set with a lock, a source of rows and
 * a callback per subscriber. watch_notify(key) reads key's row once and
 * calls every subscriber of key whose "last heard" digest of the row
 * differs; a subscriber hears the row at once when it subscribes. Changes
 * in quick succession may be heard as their end state only (a subscriber
 * learns the state, not every step). Callbacks run under the registry's
 * lock, one at a time: they must not block nor call the registry back.
 * The registry names no transport and no table: the source says how to
 * read a row and what of it counts as a change. */
#ifndef LABD_WATCH_H
#define LABD_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

/* One subscription in a set: whose (counted against user_id) and what it
 * follows (key). */
struct watch_entry {
	int64_t user_id, key;
	LIST_ENTRY(watch_entry) link;
};

struct watch_set {
	LIST_HEAD(watch_entries, watch_entry) entries;
	unsigned n, max_per_user, max_total;
};

/* The struct of type whose member is the entry e. */
#define watch_entry_of(e, type, member) ((type *)(void *)((char *)(e) - offsetof(type, member)))

/* An empty set with these caps. */
void watch_set_init(struct watch_set *s, unsigned max_per_user, unsigned max_total);
/* Adds e, user_id's, following key. 0; -ENFILE when the set has max_total,
 * -EUSERS when user_id has max_per_user (the set unchanged). */
int watch_set_add(struct watch_set *s, struct watch_entry *e, int64_t user_id, int64_t key);
/* Takes e (in s) out. */
void watch_set_remove(struct watch_set *s, struct watch_entry *e);
/* Entries of user_id. */
unsigned watch_set_count(const struct watch_set *s, int64_t user_id);
/* Whether an entry follows key. */
bool watch_set_follows(const struct watch_set *s, int64_t key);

/* What a subscriber heard last of its row: the words of the row that a
 * reader sees change (a source fills them; the rest stays 0). */
#define WATCH_DIGEST_WORDS 12
struct watch_digest {
	uint64_t word[WATCH_DIGEST_WORDS];
};

/* How a registry reads its rows. */
struct watch_source {
	const char *name;  /* for the log: "runtime", "job" */
	size_t row_size;   /* bytes of one row (the source's struct) */
	/* Reads key's row into row: 1, 0 when there is none, < 0 on failure.
	 * Runs under the registry's lock. */
	int (*read)(void *ctx, int64_t key, void *row);
	/* What a subscriber must hear change of row (NULL: none); d is zeroed. */
	void (*digest)(const void *row, struct watch_digest *d);
	/* Frees what read put in row; NULL when nothing. */
	void (*release)(void *row);
	/* Subscribing to a key without a row fails (-ENOENT) rather than
	 * hearing NULL. */
	bool row_required;
};

struct watch;
struct watcher;

/* row is the source's row, borrowed for the call; NULL when there is none. */
typedef void (*watch_fn)(void *ctx, const void *row);

/* A registry of src's rows (src and ctx borrowed until watch_free), with at
 * most max_per_user subscriptions of one user and max_total in all. NULL on
 * failure (logged). */
struct watch *watch_new(const struct watch_source *src, void *ctx, unsigned max_per_user,
			unsigned max_total);
/* Frees the registry and any subscription left. NULL is fine. */
void watch_free(struct watch *w);

/* Subscribes fn(ctx, row) to key's row, counted as user_id's, and calls it
 * at once with the row as it is. 0 and *out (release with
 * watch_unsubscribe); -EUSERS when the user has max_per_user, -ENFILE when
 * the registry is full, -ENOENT when the source requires a row and there is
 * none, -ENOMEM, -EIO when the source failed. */
int watch_subscribe(struct watch *w, int64_t user_id, int64_t key, watch_fn fn, void *ctx,
		    struct watcher **out);
/* Ends a subscription: once it returns, its fn is not running and never
 * runs again. NULL is fine. */
void watch_unsubscribe(struct watch *w, struct watcher *s);
/* key's row may have changed: its subscribers hear it if what they heard
 * last differs. NULL w is fine. */
void watch_notify(struct watch *w, int64_t key);
/* Subscriptions of user_id now. */
unsigned watch_count(struct watch *w, int64_t user_id);

#endif
