/* throttle.c - login backoff and lockout; see throttle.h. */
#include "store/throttle.h"

#include "store/db.h"

int64_t throttle_backoff_delay(const struct throttle_policy *p, unsigned failures)
{
	int64_t delay;

	if (failures < p->backoff_after || p->backoff_base <= 0)
		return 0;
	unsigned doublings = failures - p->backoff_after;
	if (doublings > 30)
		return p->backoff_max;
	delay = p->backoff_base << doublings;
	return delay > p->backoff_max ? p->backoff_max : delay;
}

/* Reads a key's row; returns 1 and fills the fields, 0 absent, -1 error. */
static int load(struct db *db, const char *key, int64_t *failures, int64_t *last,
		int64_t *locked_until)
{
	sqlite3_stmt *st;
	int rc;

	if (db_prepare(db, &st,
		       "SELECT failures, last_failure, locked_until FROM login_failures"
		       " WHERE key = ?",
		       "t", key) < 0)
		return -1;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*failures = sqlite3_column_int64(st, 0);
		*last = sqlite3_column_int64(st, 1);
		*locked_until = sqlite3_column_int64(st, 2);
	}
	db_done(db, st);
	return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

/* Failures older than a lockout period are forgotten, so a user who mistypes
 * once a week never drifts into backoff. */
static int64_t live_failures(const struct throttle_policy *p, int64_t failures, int64_t last,
			     int64_t now)
{
	return now - last >= p->lockout_duration ? 0 : failures;
}

enum throttle_state throttle_check(struct db *db, const char *key, const struct throttle_policy *p,
				   int64_t now, int64_t *retry_after)
{
	int64_t failures = 0, last = 0, locked_until = 0;
	enum throttle_state state = THROTTLE_ALLOWED;

	*retry_after = 0;
	db_lock(db);
	if (load(db, key, &failures, &last, &locked_until) == 1) {
		if (locked_until > now) {
			state = THROTTLE_LOCKED;
			*retry_after = locked_until - now;
		} else {
			failures = live_failures(p, failures, last, now);
			int64_t wait = throttle_backoff_delay(p, (unsigned)failures);
			if (failures > 0 && last + wait > now) {
				state = THROTTLE_BACKOFF;
				*retry_after = last + wait - now;
			}
		}
	}
	db_unlock(db);
	return state;
}

enum throttle_state throttle_fail(struct db *db, const char *key, const struct throttle_policy *p,
				  int64_t now)
{
	int64_t failures = 0, last = 0, locked_until = 0;
	enum throttle_state state = THROTTLE_ALLOWED;

	db_lock(db);
	if (load(db, key, &failures, &last, &locked_until) == 1 && locked_until <= now)
		failures = live_failures(p, failures, last, now);
	failures++;
	if (failures >= p->lockout_failures) {
		locked_until = now + p->lockout_duration;
		state = THROTTLE_LOCKED;
		failures = 0; /* after the lockout the count starts again */
	}
	db_exec(db,
		"INSERT INTO login_failures (key, failures, last_failure, locked_until)"
		" VALUES (?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET failures = excluded.failures,"
		" last_failure = excluded.last_failure, locked_until = excluded.locked_until",
		"tiii", key, failures, now, locked_until);
	db_unlock(db);
	return state;
}

void throttle_clear(struct db *db, const char *key)
{
	db_lock(db);
	db_exec(db, "DELETE FROM login_failures WHERE key = ?", "t", key);
	db_unlock(db);
}
