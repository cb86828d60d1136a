/* watch.h - the registry of who wants to hear when a user's runtime changes
 * state (labd/watch.h, keyed by user id).
 *
 * The runtime layer calls runtime_watch_notify() after each state change of
 * a user's runtime (a new starting row, running, stopping, stopped, failed);
 * subscribers (the API's event streams: watch_subscribe with the user's id
 * as both user and key) get the user's newest runtime (a const struct
 * runtime *, NULL when none) as it is in the store then, once per change of
 * its id, state, and while queued its position or estimated start. */
#ifndef LABD_RUNTIME_WATCH_H
#define LABD_RUNTIME_WATCH_H

#include <stdint.h>

struct db;
struct watch;

/* A registry reading runtimes from db (borrowed until watch_free), with at
 * most max_per_user subscriptions per user and max_total in all. NULL on
 * failure (logged). */
struct watch *runtime_watch_new(struct db *db, unsigned max_per_user, unsigned max_total);
/* Tells user_id's subscribers that the runtime may have changed (they hear
 * of it only if its id, state or queue place did). NULL w is fine. */
void runtime_watch_notify(struct watch *w, int64_t user_id);

#endif
