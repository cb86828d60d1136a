/* throttle.h - login throttling per user name and per client address:
 * exponential backoff after a few failures, then a lockout. Counters live in
 * the store so a web-process restart does not reset them. */
#ifndef LABD_THROTTLE_H
#define LABD_THROTTLE_H

#include <stdint.h>

struct db;

struct throttle_policy {
	unsigned backoff_after;    /* failures before backoff starts */
	int64_t backoff_base_s;    /* doubled per further failure */
	int64_t backoff_max_s;
	unsigned lockout_failures; /* failures that lock */
	int64_t lockout_duration_s;
};

enum throttle_state { THROTTLE_ALLOWED, THROTTLE_BACKOFF, THROTTLE_LOCKED };

/* Pure: the wait required after `failures` failures (0 = none). */
int64_t throttle_backoff_delay(const struct throttle_policy *p, unsigned failures);
/* Whether an attempt for key may be checked now; *retry_after gets seconds to wait. */
enum throttle_state throttle_check(struct db *db, const char *key, const struct throttle_policy *p,
				   int64_t now, int64_t *retry_after);
/* Records a failure; returns THROTTLE_LOCKED when this failure locked the key,
 * else THROTTLE_ALLOWED. */
enum throttle_state throttle_fail(struct db *db, const char *key, const struct throttle_policy *p,
				  int64_t now);
/* Forgets a key's failures (after a successful login). */
void throttle_clear(struct db *db, const char *key);

#endif
