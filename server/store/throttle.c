/* throttle.c - login backoff and lockout; see throttle.h. */
#include "store/throttle.h"

#include "store/db.h"

int64_t throttle_backoff_delay(const struct throttle_policy *p, unsigned failures)
{
	int64_t delay;

	if (failures < p->backoff_after || p->backoff_base_s <= 0)
		return 0;
	unsigned doublings = failures - p->backoff_after;
	if (doublings > 30)
		return p->backoff_max_s;
	delay = p->backoff_base_s << doublings;
	return delay > p->backoff_max_s ? p->backoff_max_s : delay;
}

struct failure_row {
	int64_t failures, last, locked_until;
};

static int failure_from_row(sqlite3_stmt *st, void *arg)
{
	struct failure_row *r = arg;

	r->failures = sqlite3_column_int64(st, 0);
	r->last = sqlite3_column_int64(st, 1);
	r->locked_until = sqlite3_column_int64(st, 2);
	return 0;
}

/* Reads a key's row; returns 1 and fills *r, 0 absent, -EIO error. */
static int load(struct db *db, const char *key, struct failure_row *r)
{
	return db_one(db,
		      "SELECT failures, last_failure, locked_until FROM login_failures"
		      " WHERE key = ?",
		      "t", failure_from_row, r, key);
}

/* Failures older than a lockout period are forgotten, so a user who mistypes
 * once a week never drifts into backoff. */
static int64_t live_failures(const struct throttle_policy *p, int64_t failures, int64_t last,
			     int64_t now)
{
	return now - last >= p->lockout_duration_s ? 0 : failures;
}

enum throttle_state throttle_check(struct db *db, const char *key, const struct throttle_policy *p,
				   int64_t now, int64_t *retry_after)
{
	struct failure_row r = {0};
	enum throttle_state state = THROTTLE_ALLOWED;

	*retry_after = 0;
	db_lock(db);
	if (load(db, key, &r) == 1) {
		if (r.locked_until > now) {
			state = THROTTLE_LOCKED;
			*retry_after = r.locked_until - now;
		} else {
			int64_t failures = live_failures(p, r.failures, r.last, now);
			int64_t wait = throttle_backoff_delay(p, (unsigned)failures);
			if (failures > 0 && r.last + wait > now) {
				state = THROTTLE_BACKOFF;
				*retry_after = r.last + wait - now;
			}
		}
	}
	db_unlock(db);
	return state;
}

enum throttle_state throttle_fail(struct db *db, const char *key, const struct throttle_policy *p,
				  int64_t now)
{
	struct failure_row r = {0};
	enum throttle_state state = THROTTLE_ALLOWED;

	db_lock(db);
	if (load(db, key, &r) == 1 && r.locked_until <= now)
		r.failures = live_failures(p, r.failures, r.last, now);
	r.failures++;
	if (r.failures >= p->lockout_failures) {
		r.locked_until = now + p->lockout_duration_s;
		state = THROTTLE_LOCKED;
		r.failures = 0; /* after the lockout the count starts again */
	}
	db_exec(db,
		"INSERT INTO login_failures (key, failures, last_failure, locked_until)"
		" VALUES (?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET failures = excluded.failures,"
		" last_failure = excluded.last_failure, locked_until = excluded.locked_until",
		"tiii", key, r.failures, now, r.locked_until);
	db_unlock(db);
	return state;
}

void throttle_clear(struct db *db, const char *key)
{
	db_lock(db);
	db_exec(db, "DELETE FROM login_failures WHERE key = ?", "t", key);
	db_unlock(db);
}
