/* watch.h - who wants to hear when a user's runtime changes state.
 *
 * The runtime layer calls runtime_watch_notify() after each state change of
 * a user's runtime (a new starting row, running, stopping, stopped, failed);
 * subscribers (the API's event streams) get the user's newest runtime as it
 * is in the store then. The registry names no transport: a subscriber is a
 * callback and its context.
 *
 * Delivery: at subscription, then once per change of (runtime, state, and
 * while queued its position or estimated start), in
 * the order the store went through them; changes in quick succession may be
 * seen as their end state only (a subscriber learns the state, not every
 * step). Callbacks run under the registry's lock, one at a time: they must
 * not block nor call the registry back. */
#ifndef LABD_RUNTIME_WATCH_H
#define LABD_RUNTIME_WATCH_H

#include <stdint.h>

struct db;
struct runtime;
struct runtime_watch;
struct runtime_watcher;

/* r is the user's newest runtime, borrowed for the call; NULL when none. */
typedef void (*runtime_watch_fn)(void *ctx, const struct runtime *r);

/* A registry reading rows from db (borrowed until runtime_watch_free), with
 * at most max_per_user subscriptions per user and max_total in all. NULL on
 * failure (logged). */
struct runtime_watch *runtime_watch_new(struct db *db, unsigned max_per_user, unsigned max_total);
/* Frees the registry and any subscription left. NULL is fine. */
void runtime_watch_free(struct runtime_watch *w);

/* Subscribes fn(ctx, r) to user_id's runtime and calls it once at once with
 * the current row. 0 and *out (release with runtime_watch_unsubscribe);
 * -EUSERS when the user has max_per_user, -ENFILE when the registry is full,
 * -ENOMEM, -EIO when the store failed. */
int runtime_watch_subscribe(struct runtime_watch *w, int64_t user_id, runtime_watch_fn fn,
			    void *ctx, struct runtime_watcher **out);
/* Ends a subscription: once it returns, fn is not running and never runs
 * again for it. NULL is fine. */
void runtime_watch_unsubscribe(struct runtime_watch *w, struct runtime_watcher *sub);
/* Tells user_id's subscribers that the runtime may have changed (they hear
 * of it only if its id, state or queue place did). NULL w is fine. */
void runtime_watch_notify(struct runtime_watch *w, int64_t user_id);
/* Subscriptions of user_id now. */
unsigned runtime_watch_count(struct runtime_watch *w, int64_t user_id);

#endif
