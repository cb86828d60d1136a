/* login.c - the login procedure and its throttling; see auth.h (auth_login).
 *
 * Policy (docs/security.md, section 6): every failure counts against the user
 * name and against the client address; after backoff_after failures a key
 * imposes a delay that doubles per further failure up to a cap, and attempts
 * inside it are answered 429 without being checked. There is no lockout: once
 * the delay has run, the right password works. The per-user delay binds only
 * a client that has itself failed recently, so an attacker hammering a name
 * from elsewhere slows down only himself, never its owner. */
#include "auth/auth.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "labd/app.h"
#include "auth/password.h"
#include "config/config.h"
#include "store/audit.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "metrics/labd.h"
#include "store/db.h"
#include "store/throttle.h"

#define INVALID_NAME "(invalid)"

/* One attempt's keys and what counting it gave. */
struct attempt {
	const char *name, *address;
	char ukey[96], akey[96];
	int64_t now;
	int user_failures, addr_failures; /* live failures including this attempt */
};

/* An IPv6 client is keyed by its /64: one host is usually handed a whole /64,
 * so keying single addresses would give it 2^64 fresh counters. */
static void address_key(const char *address, char *out, size_t len)
{
	struct in6_addr a;
	char text[INET6_ADDRSTRLEN];

	if (strchr(address, ':') && inet_pton(AF_INET6, address, &a) == 1 &&
	    !IN6_IS_ADDR_V4MAPPED(&a)) {
		memset(&a.s6_addr[8], 0, 8);
		inet_ntop(AF_INET6, &a, text, sizeof(text));
		snprintf(out, len, "addr:%s/64", text);
	} else {
		snprintf(out, len, "addr:%s", address);
	}
}

static void attempt_init(struct attempt *at, const char *name, const char *address)
{
	*at = (struct attempt){.name = name, .address = address, .now = time(NULL)};
	snprintf(at->ukey, sizeof(at->ukey), "user:%s", name);
	address_key(address, at->akey, sizeof(at->akey));
}

/* Decides whether the attempt may be checked now and, if so, counts it as a
 * failure on both keys before any hashing, all under one store lock: parallel
 * attempts then cannot all slip through one open window. */
static enum login_result attempt_begin(struct app *app, struct attempt *at, int64_t *retry_after)
{
	struct throttle_status su, sa;
	enum login_result res = LOGIN_ERROR;

	db_lock(app->db);
	if (throttle_read(app->db, at->ukey, app->throttle, at->now, &su) < 0 ||
	    throttle_read(app->db, at->akey, app->throttle_addr, at->now, &sa) < 0)
		goto out;
	*retry_after = sa.retry_after_s;
	/* A client with no recent failure of its own is not held back by what
	 * others did to this name. */
	if (sa.failures > 0 && su.retry_after_s > *retry_after)
		*retry_after = su.retry_after_s;
	if (*retry_after > 0) {
		res = LOGIN_THROTTLED;
		goto out;
	}
	at->user_failures = throttle_count(app->db, at->ukey, app->throttle, at->now);
	at->addr_failures = throttle_count(app->db, at->akey, app->throttle_addr, at->now);
	res = at->user_failures < 0 || at->addr_failures < 0 ? LOGIN_ERROR : LOGIN_OK;
out:
	db_unlock(app->db);
	return res;
}

/* The attempt was not checked after all (no hashing slot, a store error). */
static void attempt_abandon(struct app *app, const struct attempt *at)
{
	throttle_uncount(app->db, at->ukey);
	throttle_uncount(app->db, at->akey);
}

/* The password was right: the name's counter starts again; the address only
 * gets this attempt back (an attacker's own account must not wipe the
 * address's record of guesses at others). */
static void attempt_succeed(struct app *app, const struct attempt *at)
{
	throttle_clear(app->db, at->ukey);
	throttle_uncount(app->db, at->akey);
}

/* Crossing the alert threshold is audited and logged once per streak. */
static void alert_if_crossed(struct app *app, const struct attempt *at)
{
	unsigned after = app->cfg->alert_after;
	char detail[128];

	if (at->user_failures == (int)after) {
		snprintf(detail, sizeof(detail), "%u failed logins for this user name", after);
		log_warn("auth: %u failed logins for user %s (last from %s)", after, at->name,
			 at->address);
		if (audit_add(app->db, at->now, NULL, "login.alert", at->name, at->address, detail) < 0)
			log_error("audit: login.alert of %s not recorded", at->name);
	}
	if (at->addr_failures == (int)after) {
		snprintf(detail, sizeof(detail), "%u failed logins from this address", after);
		log_warn("auth: %u failed logins from %s (last for %s)", after, at->address,
			 at->name);
		if (audit_add(app->db, at->now, NULL, "login.alert", at->name, at->address, detail) < 0)
			log_error("audit: login.alert of %s not recorded", at->address);
	}
}

static void attempt_fail(struct app *app, const struct attempt *at, const char *action,
			 const char *why)
{
	if (audit_add(app->db, at->now, NULL, action, at->name, at->address, why) < 0)
		log_error("audit: %s of %s not recorded", action, at->name);
	alert_if_crossed(app, at);
}

/* Hashes under a slot; false with *busy set when no slot freed in time. */
static bool verify_bounded(struct app *app, const char *password, const struct user *user,
			   bool *busy)
{
	bool ok;

	*busy = password_slot_acquire() < 0;
	if (*busy)
		return false;
	/* Same work whether or not the user exists, so timing reveals nothing. */
	ok = user ? password_verify(password, user->password_hash)
		  : password_verify_dummy(password, app->password);
	password_slot_release();
	return ok;
}

enum login_result auth_login(struct app *app, const char *name, const char *password,
			     const char *address, struct user *user, struct session *session,
			     char secret[SESSION_SECRET_LEN + 1], int64_t *retry_after)
{
	struct attempt at;
	enum login_result res;
	bool busy;
	int found = 0;

	*retry_after = 0;
	/* Names are bounded and validated before they reach keys or the log. */
	attempt_init(&at, parse_user_name_ok(name) ? name : INVALID_NAME, address);
	if ((res = attempt_begin(app, &at, retry_after)) != LOGIN_OK)
		return res;
	if (strcmp(at.name, INVALID_NAME) != 0)
		found = users_find_by_name(app->db, at.name, user);
	if (found < 0) {
		attempt_abandon(app, &at);
		return LOGIN_ERROR;
	}
	bool ok = verify_bounded(app, password, found ? user : NULL, &busy);
	if (busy) {
		attempt_abandon(app, &at);
		*retry_after = 1;
		return LOGIN_BUSY;
	}
	if (!ok || user->disabled) {
		metrics_login_failure();
		attempt_fail(app, &at, "login.failure",
			     !found ? "unknown user" : !ok ? "wrong password" : "account disabled");
		return LOGIN_INVALID;
	}
	attempt_succeed(app, &at);
	if (sessions_create(app->db, user->id, address, app->session, at.now, secret, session) < 0)
		return LOGIN_ERROR;
	if (audit_add(app->db, at.now, user->name, "login.success", user->name, address, NULL) < 0)
		log_error("audit: login.success of %s not recorded", user->name);
	return LOGIN_OK;
}

enum login_result auth_check_password(struct app *app, const struct user *user,
				      const char *password, const char *address,
				      const char *action, int64_t *retry_after)
{
	struct attempt at;
	enum login_result res;
	bool busy;

	*retry_after = 0;
	attempt_init(&at, user->name, address);
	if ((res = attempt_begin(app, &at, retry_after)) != LOGIN_OK)
		return res;
	bool ok = verify_bounded(app, password, user, &busy);
	if (busy) {
		attempt_abandon(app, &at);
		*retry_after = 1;
		return LOGIN_BUSY;
	}
	if (!ok) {
		attempt_fail(app, &at, action, "wrong current password");
		return LOGIN_INVALID;
	}
	attempt_succeed(app, &at);
	return LOGIN_OK;
}
