/* throttle.c - failure counters and their delay; see throttle.h. */
#include "store/throttle.h"

#include <errno.h>

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
	int64_t failures, last;
};

static int failure_from_row(sqlite3_stmt *st, void *arg)
{
	struct failure_row *r = arg;

	r->failures = sqlite3_column_int64(st, 0);
	r->last = sqlite3_column_int64(st, 1);
	return 0;
}

/* Reads a key's row with failures older than the window forgotten, so a user
 * who mistypes once a week never drifts into a delay; 0 or -EIO. */
static int load_live(struct db *db, const char *key, const struct throttle_policy *p,
		     int64_t now, struct failure_row *r)
{
	int rc = db_one(db, "SELECT failures, last_failure FROM login_failures WHERE key = ?", "t",
			failure_from_row, r, key);

	if (rc < 0)
		return -EIO;
	if (rc == 0 || now - r->last >= p->window_s || r->failures < 0)
		r->failures = 0;
	return 0;
}

int throttle_read(struct db *db, const char *key, const struct throttle_policy *p, int64_t now,
		  struct throttle_status *st)
{
	struct failure_row r = {0};
	int rc;

	*st = (struct throttle_status){0};
	db_lock(db);
	rc = load_live(db, key, p, now, &r);
	db_unlock(db);
	if (rc < 0)
		return rc;
	int64_t wait = throttle_backoff_delay(p, (unsigned)r.failures);
	st->failures = (unsigned)r.failures;
	if (r.failures > 0 && r.last + wait > now)
		st->retry_after_s = r.last + wait - now;
	return 0;
}

int throttle_count(struct db *db, const char *key, const struct throttle_policy *p, int64_t now)
{
	struct failure_row r = {0};
	int rc;

	db_lock(db);
	rc = load_live(db, key, p, now, &r);
	/* locked_until is no longer used (there is no lockout): always 0 */
	if (rc == 0 && db_exec(db,
			       "INSERT INTO login_failures (key, failures, last_failure, locked_until)"
			       " VALUES (?, ?, ?, 0) ON CONFLICT (key) DO UPDATE SET"
			       " failures = excluded.failures, last_failure = excluded.last_failure,"
			       " locked_until = 0",
			       "tii", key, r.failures + 1, now) < 0)
		rc = -EIO;
	db_unlock(db);
	return rc < 0 ? rc : (int)(r.failures + 1);
}

int throttle_uncount(struct db *db, const char *key)
{
	int rc;

	db_lock(db);
	rc = db_exec(db,
		     "UPDATE login_failures SET failures = failures - 1 WHERE key = ? AND failures > 0",
		     "t", key);
	db_unlock(db);
	return rc < 0 ? -EIO : 0;
}

void throttle_clear(struct db *db, const char *key)
{
	db_lock(db);
	db_exec(db, "DELETE FROM login_failures WHERE key = ?", "t", key);
	db_unlock(db);
}
