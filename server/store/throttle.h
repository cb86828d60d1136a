/* throttle.h - failed-login counters per key (a user name, a client address):
 * a progressive delay after a few failures, capped, and never a lockout.
 * Counters live in the store so a web-process restart does not reset them.
 * The policy that combines keys is auth's (auth_login); this is the ledger. */
#ifndef LABD_THROTTLE_H
#define LABD_THROTTLE_H

#include <stdint.h>

struct db;

struct throttle_policy {
	unsigned backoff_after; /* failures before the delay starts */
	int64_t backoff_base_s; /* the first delay, doubled per further failure */
	int64_t backoff_max_s;  /* the cap */
	int64_t window_s;       /* failures this long after the last one are forgotten */
};

/* A key's state at one instant. */
struct throttle_status {
	unsigned failures;     /* live failures (within window_s of the last one) */
	int64_t retry_after_s; /* > 0 while the delay after the last failure runs */
};

/* Pure: the delay required after `failures` failures (0 = none). */
int64_t throttle_backoff_delay(const struct throttle_policy *p, unsigned failures);
/* Reads key's status at now into *st; 0 or -EIO. */
int throttle_read(struct db *db, const char *key, const struct throttle_policy *p, int64_t now,
		  struct throttle_status *st);
/* Counts one failure of key at now; returns the live failures after it (>= 1)
 * or -EIO. */
int throttle_count(struct db *db, const char *key, const struct throttle_policy *p, int64_t now);
/* Takes back one counted failure (an attempt counted before it was checked
 * turned out right); 0 or -EIO. */
int throttle_uncount(struct db *db, const char *key);
/* Forgets a key's failures (after a successful login). */
void throttle_clear(struct db *db, const char *key);

#endif
