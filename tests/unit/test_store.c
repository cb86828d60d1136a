/* Unit tests over a real SQLite file: migrations, the row walker, users,
 * sessions, tokens, login throttling. */
#include "unit.h"

#include <errno.h>
#include <sqlite3.h>

#include "store/audit.h"
#include "store/db.h"
#include "store/migrations.h"
#include "store/plans.h"
#include "store/user_quotas.h"
#include "store/runtimes.h"
#include "store/sessions.h"
#include "store/throttle.h"
#include "store/tokens.h"
#include "store/users.h"

struct fixture {
	char dir[64];
	char path[128];
	struct db *db;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	unit_tempdir(f->dir);
	snprintf(f->path, sizeof(f->path), "%s/labd.db", f->dir);
	assert_int_equal(db_open(f->path, &f->db), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	db_close(f->db);
	unit_rmdir(f->dir);
	free(f);
	return 0;
}

static int64_t make_user(struct db *db, const char *name, enum user_role role)
{
	struct user u;
	assert_int_equal(users_create(db, name, role, "$scrypt$x", 1000, &u), 0);
	return u.id;
}

static void exec_raw(sqlite3 *raw, const char *sql)
{
	char *err = NULL;
	int rc = sqlite3_exec(raw, sql, NULL, NULL, &err);
	if (rc != SQLITE_OK)
		fail_msg("%s: %s", sql, err ? err : "?");
}

/* Migration 4 rebuilds users with AUTOINCREMENT: every id, session and
 * runtime of a schema-3 database survives (the drop of the old table must not
 * cascade), and from then on a deleted user's id is never handed out again. */
static void test_user_ids_never_reused_after_migration(void **state)
{
	struct fixture *f = *state;
	char path[160], sql[128];
	struct db *db;
	struct user u;
	sqlite3 *raw;

	snprintf(path, sizeof(path), "%s/v3.db", f->dir);
	assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
	exec_raw(raw, "PRAGMA foreign_keys = ON");
	for (int v = 1; v <= 3; v++)
		exec_raw(raw, migrations_sql(v));
	exec_raw(raw, "PRAGMA user_version = 3");
	exec_raw(raw, "INSERT INTO users VALUES (1,'ann','admin','h',0,1,1),(5,'bob','user','h',0,1,1)");
	exec_raw(raw, "INSERT INTO sessions (user_id, token_hash, csrf_token, created_at, last_seen,"
		      " expires_at) VALUES (5, 'th', 'c', 1, 1, 9999999999)");
	exec_raw(raw, "INSERT INTO runtimes (user_id, kind, state, token, created_at, deadline,"
		      " last_activity) VALUES (5, 'cpu', 'stopped', 't', 1, 2, 1)");
	sqlite3_close(raw);

	assert_int_equal(db_open(path, &db), 0);
	assert_int_equal(db_schema_version(db), migrations_count());
	assert_int_equal(users_find_by_name(db, "bob", &u), 1);
	assert_int_equal(u.id, 5);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM sessions WHERE user_id = 5");
	int n = -1;
	assert_int_equal(db_one(db, sql, "", db_row_int, &n), 1);
	assert_int_equal(n, 1);
	assert_int_equal(db_one(db, "SELECT count(*) FROM runtimes WHERE user_id = 5", "",
				db_row_int, &n), 1);
	assert_int_equal(n, 1);
	/* the newest user deleted: its id stays used */
	assert_int_equal(users_delete(db, "bob"), USERS_OK);
	assert_int_equal(make_user(db, "bob", USER_ROLE_USER), 6);
	/* and foreign keys are enforced again after the migration */
	assert_int_equal(users_delete(db, "bob"), USERS_OK);
	assert_int_equal(db_one(db, "SELECT count(*) FROM sessions", "", db_row_int, &n), 1);
	assert_int_equal(n, 0);
	db_close(db);
}

static void test_migrations_apply_once(void **state)
{
	struct fixture *f = *state;
	struct db *again;
	sqlite3 *raw;
	sqlite3_stmt *st;

	assert_int_equal(db_schema_version(f->db), migrations_count());
	assert_int_equal(db_latest_version(), migrations_count());
	assert_null(migrations_sql(0));
	assert_null(migrations_sql(migrations_count() + 1));
	db_close(f->db);
	assert_int_equal(db_open(f->path, &again), 0); /* re-open applies nothing twice */
	assert_int_equal(db_schema_version(again), migrations_count());
	db_close(again);
	/* WAL journal mode persists in the file. */
	assert_int_equal(sqlite3_open(f->path, &raw), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(raw, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
	sqlite3_finalize(st);
	/* A database from a newer labd is refused, not downgraded. */
	assert_int_equal(sqlite3_exec(raw, "PRAGMA user_version = 999", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(raw);
	assert_int_equal(db_open(f->path, &again), -1);
	/* teardown closes f->db: give it a fresh store */
	char fresh[128];
	snprintf(fresh, sizeof(fresh), "%s/fresh.db", f->dir);
	assert_int_equal(db_open(fresh, &f->db), 0);
}

/* A runtime's image follows a limit's precedence: the user's own plan, else the first of
 * their groups by name whose plan has one, else "" (the host's root). */
static void test_plans_user_image(void **state)
{
	struct fixture *f = *state;
	struct quota_limits none;
	struct plan p;
	sqlite3 *raw;
	char image[64];
	int64_t alice = make_user(f->db, "alice", USER_ROLE_USER);

	quota_limits_clear(&none);
	assert_int_equal(plans_create(f->db, "plain", &none, "", 1, &p), QUOTA_OK);
	assert_int_equal(plans_create(f->db, "ml", &none, "ml", 1, &p), QUOTA_OK);
	assert_string_equal(p.image, "ml");
	assert_int_equal(plans_create(f->db, "small", &none, "small", 1, &p), QUOTA_OK);
	assert_int_equal(plans_user_image(f->db, alice, image, sizeof(image)), 0);
	assert_string_equal(image, "");
	assert_int_equal(sqlite3_open(f->path, &raw), SQLITE_OK);
	exec_raw(raw, "INSERT INTO groups (id, name, plan_id, created_at) VALUES"
		      " (1, 'zz', (SELECT id FROM plans WHERE name = 'small'), 1),"
		      " (2, 'aa', (SELECT id FROM plans WHERE name = 'ml'), 1),"
		      " (3, 'a0', (SELECT id FROM plans WHERE name = 'plain'), 1);"
		      "INSERT INTO group_members (group_id, user_id) VALUES (1, 1), (2, 1), (3, 1);");
	sqlite3_close(raw);
	assert_int_equal(plans_user_image(f->db, alice, image, sizeof(image)), 0);
	assert_string_equal(image, "ml"); /* group aa: the first by name with an image */
	assert_int_equal(user_quotas_set(f->db, alice, true, "small", NULL, 2), QUOTA_OK);
	assert_int_equal(plans_user_image(f->db, alice, image, sizeof(image)), 0);
	assert_string_equal(image, "small"); /* the own plan first */
	assert_int_equal(plans_update(f->db, "small", &none, "", 3), QUOTA_OK);
	assert_int_equal(plans_user_image(f->db, alice, image, sizeof(image)), 0);
	assert_string_equal(image, "ml"); /* an own plan without one: the groups' */
}

/* A plan's kind of GPU device (schema 20): "whole" by default, "share" or a
 * MIG profile <n>g.<m>gb; a job may ask within it; a user's follows the plan
 * the ledger names (own plan, else the first group's by name). */
static void test_plans_gpu(void **state)
{
	struct fixture *f = *state;
	struct quota_limits none;
	struct plan p;
	sqlite3 *raw;
	char kind[PLAN_GPU_MAX];
	int64_t alice = make_user(f->db, "alice", USER_ROLE_USER);

	const char *good[] = {"whole", "share", "1g.18gb", "7g.141gb", "3g.71gb", "1g.10gb"};
	const char *bad[] = {"", "Whole", "mig", "0g.18gb", "1g.0gb", "10g.18gb", "1g.18GB",
			     "1g.18gb+me", "1g18gb", "g.18gb", "1g.gb", "1g.01gb", "1g.18gbx",
			     "1g.18888gb"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_true(plans_gpu_ok(good[i]));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(plans_gpu_ok(bad[i]));
	assert_true(plans_gpu_allows("whole", "1g.18gb"));
	assert_true(plans_gpu_allows("whole", "share"));
	assert_true(plans_gpu_allows("3g.71gb", "1g.18gb"));
	assert_true(plans_gpu_allows("3g.71gb", "3g.71gb"));
	assert_false(plans_gpu_allows("3g.71gb", "4g.71gb"));
	assert_false(plans_gpu_allows("2g.35gb", "1g.71gb"));
	assert_false(plans_gpu_allows("3g.71gb", "whole"));
	assert_false(plans_gpu_allows("3g.71gb", "share"));
	assert_false(plans_gpu_allows("share", "1g.18gb"));
	assert_true(plans_gpu_allows("share", "share"));
	assert_false(plans_gpu_allows("whole", "nonsense"));

	quota_limits_clear(&none);
	assert_int_equal(plans_create(f->db, "class", &none, "", 1, &p), QUOTA_OK);
	assert_string_equal(p.gpu, "whole");
	assert_int_equal(plans_set_gpu(f->db, "class", "1g.18gb"), QUOTA_OK);
	assert_int_equal(plans_set_gpu(f->db, "nope", "share"), QUOTA_NOT_FOUND);
	assert_int_equal(plans_find(f->db, "class", &p), 1);
	assert_string_equal(p.gpu, "1g.18gb");
	assert_int_equal(plans_create(f->db, "lab", &none, "", 1, &p), QUOTA_OK);
	assert_int_equal(plans_set_gpu(f->db, "lab", "share"), QUOTA_OK);
	assert_int_equal(plans_user_gpu(f->db, alice, kind, sizeof(kind)), 0);
	assert_string_equal(kind, "whole"); /* no plan */
	assert_int_equal(sqlite3_open(f->path, &raw), SQLITE_OK);
	exec_raw(raw, "INSERT INTO groups (id, name, plan_id, created_at) VALUES"
		      " (1, 'zz', (SELECT id FROM plans WHERE name = 'class'), 1),"
		      " (2, 'aa', (SELECT id FROM plans WHERE name = 'lab'), 1);"
		      "INSERT INTO group_members (group_id, user_id) VALUES (1, 1), (2, 1);");
	sqlite3_close(raw);
	assert_int_equal(plans_user_gpu(f->db, alice, kind, sizeof(kind)), 0);
	assert_string_equal(kind, "share"); /* group aa: the first by name */
	assert_int_equal(user_quotas_set(f->db, alice, true, "class", NULL, 2), QUOTA_OK);
	assert_int_equal(plans_user_gpu(f->db, alice, kind, sizeof(kind)), 0);
	assert_string_equal(kind, "1g.18gb"); /* the own plan first */
}

static void test_users_crud_and_conflict(void **state)
{
	struct fixture *f = *state;
	struct user u;

	make_user(f->db, "alice", USER_ROLE_USER);
	assert_int_equal(users_create(f->db, "alice", USER_ROLE_USER, "h", 1, NULL), DB_CONFLICT);
	assert_int_equal(users_find_by_name(f->db, "alice", &u), 1);
	assert_int_equal(u.role, USER_ROLE_USER);
	assert_false(u.disabled);
	assert_int_equal(users_find_by_name(f->db, "nobody", &u), 0);
	assert_int_equal(users_count(f->db), 1);
	assert_int_equal(users_delete(f->db, "nobody"), USERS_NOT_FOUND);
}

static void test_last_admin_is_protected(void **state)
{
	struct fixture *f = *state;
	enum user_role user_role = USER_ROLE_USER;
	bool yes = true;

	make_user(f->db, "root1", USER_ROLE_ADMIN);
	make_user(f->db, "bob", USER_ROLE_USER);
	assert_int_equal(users_update(f->db, "root1", &user_role, NULL, 2), USERS_LAST_ADMIN);
	assert_int_equal(users_update(f->db, "root1", NULL, &yes, 2), USERS_LAST_ADMIN);
	assert_int_equal(users_delete(f->db, "root1"), USERS_LAST_ADMIN);
	struct user u;
	assert_int_equal(users_find_by_name(f->db, "root1", &u), 1);
	assert_int_equal(u.role, USER_ROLE_ADMIN); /* rolled back */
	assert_false(u.disabled);
	make_user(f->db, "root2", USER_ROLE_ADMIN);
	assert_int_equal(users_update(f->db, "root1", NULL, &yes, 2), USERS_OK);
	assert_int_equal(users_delete(f->db, "root1"), USERS_OK);
	assert_int_equal(users_count_admins(f->db), 1);
}

static void test_sessions(void **state)
{
	struct fixture *f = *state;
	struct session_limits lim = {.idle_s = 100, .lifetime_s = 1000};
	char secret[SESSION_SECRET_LEN + 1], secret2[SESSION_SECRET_LEN + 1];
	struct session s, found;
	int64_t uid = make_user(f->db, "carol", USER_ROLE_USER);
	sqlite3_stmt *st;

	assert_int_equal(sessions_create(f->db, uid, "127.0.0.1", &lim, 5000, secret, &s), 0);
	assert_int_equal(strlen(secret), SESSION_SECRET_LEN);
	assert_true(sessions_secret_valid(secret));
	/* Only the hash is stored. */
	db_lock(f->db);
	assert_int_equal(db_prepare(f->db, &st, "SELECT count(*) FROM sessions WHERE token_hash = ?",
				    "t", secret),
			 0);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(st, 0), 0);
	db_done(f->db, st);
	db_unlock(f->db);
	assert_int_equal(sessions_lookup(f->db, secret, &lim, 5050, &found), 1);
	assert_int_equal(found.user_id, uid);
	assert_string_equal(found.csrf_token, s.csrf_token);
	/* what a cache needs to know when the session ends */
	assert_int_equal(found.last_seen, 5050);
	assert_int_equal(found.expires_at, 6000);
	/* idle expiry: last use at 5050 (touched), now 5050+100 */
	assert_int_equal(sessions_lookup(f->db, secret, &lim, 5150, &found), 0);
	assert_int_equal(sessions_lookup(f->db, secret, &lim, 5151, &found), 0); /* deleted */
	/* absolute expiry even when used constantly */
	assert_int_equal(sessions_create(f->db, uid, NULL, &lim, 10000, secret2, &s), 0);
	for (int64_t t = 10000; t < 11000; t += 50)
		assert_int_equal(sessions_lookup(f->db, secret2, &lim, t, &found), 1);
	assert_int_equal(sessions_lookup(f->db, secret2, &lim, 11000, &found), 0);
	assert_int_equal(sessions_lookup(f->db, "not-a-secret", &lim, 1, &found), 0);
	assert_false(sessions_secret_valid("abc"));
	assert_false(sessions_secret_valid("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa+"));
}

static void test_sessions_cascade_on_user_delete(void **state)
{
	struct fixture *f = *state;
	struct session_limits lim = {.idle_s = 100, .lifetime_s = 1000};
	char secret[SESSION_SECRET_LEN + 1];
	struct session s, found;
	char token[TOKEN_LEN + 1];
	struct token_info t;

	make_user(f->db, "admin", USER_ROLE_ADMIN);
	int64_t uid = make_user(f->db, "dave", USER_ROLE_USER);
	assert_int_equal(sessions_create(f->db, uid, NULL, &lim, 10, secret, &s), 0);
	assert_int_equal(tokens_create(f->db, uid, "ci", "*", 0, 10, token, &t), 0);
	assert_int_equal(users_delete(f->db, "dave"), USERS_OK);
	assert_int_equal(sessions_lookup(f->db, secret, &lim, 11, &found), 0);
	assert_int_equal(tokens_lookup(f->db, token, 11, &t), 0);
}

static int count_tokens(const struct token_info *t, void *ctx)
{
	(void)t;
	(*(int *)ctx)++;
	return 0;
}

static void test_tokens(void **state)
{
	struct fixture *f = *state;
	char token[TOKEN_LEN + 1], other[TOKEN_LEN + 1];
	struct token_info t, found;
	int64_t uid = make_user(f->db, "erin", USER_ROLE_USER);
	int64_t uid2 = make_user(f->db, "frank", USER_ROLE_USER);
	int n = 0;

	assert_int_equal(tokens_create(f->db, uid, "laptop", "*", 0, 100, token, &t), 0);
	assert_int_equal(strlen(token), TOKEN_LEN);
	assert_true(strncmp(token, "labd_", 5) == 0);
	assert_int_equal(strncmp(t.prefix, token, TOKEN_SHOWN_PREFIX_LEN), 0);
	assert_int_equal(tokens_create(f->db, uid, "laptop", "*", 0, 100, other, &t), DB_CONFLICT);
	assert_int_equal(tokens_create(f->db, uid2, "laptop", "*", 0, 100, other, &t), 0);
	assert_int_equal(tokens_lookup(f->db, token, 200, &found), 1);
	assert_int_equal(found.user_id, uid);
	assert_int_equal(found.last_used_at, 200);
	token[10] = token[10] == 'A' ? 'B' : 'A';
	assert_int_equal(tokens_lookup(f->db, token, 200, &found), 0);
	assert_int_equal(tokens_lookup(f->db, "labd_short", 200, &found), 0);
	assert_int_equal(tokens_each(f->db, uid, count_tokens, &n), 0);
	assert_int_equal(n, 1);
	/* Another user's token id cannot be revoked by this user. */
	assert_int_equal(tokens_delete(f->db, uid, t.id), 0);
	assert_int_equal(tokens_delete(f->db, uid2, t.id), 1);
	assert_int_equal(tokens_delete(f->db, uid2, t.id), 0);
	assert_true(tokens_name_valid("CI runner ✓"));
	assert_false(tokens_name_valid(""));
	assert_false(tokens_name_valid("tab\there"));
	char longname[80];
	memset(longname, 'x', 65);
	longname[65] = '\0';
	assert_false(tokens_name_valid(longname));
}

/* Every store change that ends a session or token or changes a user bumps
 * the identity generation (caches of identities trust nothing older);
 * runtime state changes bump the runtime generation. */
static void test_generations(void **state)
{
	struct fixture *f = *state;
	struct session_limits lim = {.idle_s = 100, .lifetime_s = 1000};
	char secret[SESSION_SECRET_LEN + 1], token[TOKEN_LEN + 1];
	enum user_role admin = USER_ROLE_ADMIN;
	struct session s, found;
	struct token_info t;
	struct runtime r;
	bool yes = true;
	uint64_t g;

	make_user(f->db, "root", USER_ROLE_ADMIN);
	int64_t uid = make_user(f->db, "gina", USER_ROLE_USER);
#define BUMPS(topic, expr)                                                                         \
	do {                                                                                       \
		g = db_generation(f->db, topic);                                                   \
		expr;                                                                              \
		assert_true(db_generation(f->db, topic) > g);                                      \
	} while (0)
#define KEEPS(topic, expr)                                                                         \
	do {                                                                                       \
		g = db_generation(f->db, topic);                                                   \
		expr;                                                                              \
		assert_true(db_generation(f->db, topic) == g);                                     \
	} while (0)
	KEEPS(DB_IDENTITIES, sessions_create(f->db, uid, NULL, &lim, 10, secret, &s));
	KEEPS(DB_IDENTITIES, tokens_create(f->db, uid, "ci", "*", 0, 10, token, &t));
	KEEPS(DB_IDENTITIES, sessions_lookup(f->db, secret, &lim, 20, &found));
	BUMPS(DB_IDENTITIES, sessions_delete(f->db, s.id));
	BUMPS(DB_IDENTITIES, tokens_delete(f->db, uid, t.id));
	BUMPS(DB_IDENTITIES, users_update(f->db, "gina", &admin, NULL, 30));
	BUMPS(DB_IDENTITIES, users_update(f->db, "gina", NULL, &yes, 30));
	BUMPS(DB_IDENTITIES, users_set_password(f->db, uid, "$scrypt$y", 0, 30));
	sessions_create(f->db, uid, NULL, &lim, 10, secret, &s);
	BUMPS(DB_IDENTITIES, sessions_lookup(f->db, secret, &lim, 5000, &found)); /* expired */
	sessions_create(f->db, uid, NULL, &lim, 10, secret, &s);
	BUMPS(DB_IDENTITIES, sessions_purge_expired(f->db, &lim, 5000));
	KEEPS(DB_IDENTITIES, sessions_purge_expired(f->db, &lim, 5000)); /* nothing left */
	KEEPS(DB_RUNTIMES, users_update(f->db, "gina", NULL, NULL, 40));
	BUMPS(DB_RUNTIMES, runtimes_create(f->db, uid, RUNTIME_CPU, "tok", "", 40, 100, &r));
	BUMPS(DB_RUNTIMES, runtimes_set_state(f->db, r.id, RUNTIME_RUNNING, NULL, 41));
	KEEPS(DB_RUNTIMES, runtimes_touch(f->db, r.id, 50));
	BUMPS(DB_IDENTITIES, users_delete(f->db, "gina"));
#undef BUMPS
#undef KEEPS
}

/* A write by another process (the host CLI) is noticed once and bumps every
 * generation; this connection's own writes are not. */
static void test_poll_external(void **state)
{
	struct fixture *f = *state;
	uint64_t gi, gr;
	sqlite3 *other;

	assert_int_equal(db_poll_external(f->db), 0);
	make_user(f->db, "hal", USER_ROLE_USER);
	assert_int_equal(db_poll_external(f->db), 0);
	gi = db_generation(f->db, DB_IDENTITIES);
	gr = db_generation(f->db, DB_RUNTIMES);
	assert_int_equal(sqlite3_open(f->path, &other), SQLITE_OK);
	assert_int_equal(sqlite3_exec(other, "UPDATE users SET disabled = 1 WHERE name = 'hal'", NULL,
				      NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(other);
	assert_int_equal(db_poll_external(f->db), 1);
	assert_true(db_generation(f->db, DB_IDENTITIES) > gi);
	assert_true(db_generation(f->db, DB_RUNTIMES) > gr);
	assert_int_equal(db_poll_external(f->db), 0);
}

static void test_throttle(void **state)
{
	struct fixture *f = *state;
	struct throttle_policy p = {.backoff_after = 3, .backoff_base_s = 2, .backoff_max_s = 10,
				    .window_s = 900};
	struct throttle_status st;

	assert_int_equal(throttle_backoff_delay(&p, 2), 0);
	assert_int_equal(throttle_backoff_delay(&p, 3), 2);
	assert_int_equal(throttle_backoff_delay(&p, 4), 4);
	assert_int_equal(throttle_backoff_delay(&p, 5), 8);
	assert_int_equal(throttle_backoff_delay(&p, 6), 10); /* capped */
	assert_int_equal(throttle_backoff_delay(&p, 200), 10);

	for (int i = 1; i <= 2; i++) {
		assert_int_equal(throttle_read(f->db, "user:x", &p, 1000, &st), 0);
		assert_int_equal(st.retry_after_s, 0);
		assert_int_equal(throttle_count(f->db, "user:x", &p, 1000), i);
	}
	assert_int_equal(throttle_count(f->db, "user:x", &p, 1000), 3);
	assert_int_equal(throttle_read(f->db, "user:x", &p, 1001, &st), 0);
	assert_int_equal(st.failures, 3);
	assert_int_equal(st.retry_after_s, 1);
	assert_int_equal(throttle_read(f->db, "user:x", &p, 1002, &st), 0);
	assert_int_equal(st.retry_after_s, 0);
	/* no lockout however many failures: the delay stays at the cap */
	for (int i = 4; i <= 40; i++)
		assert_int_equal(throttle_count(f->db, "user:x", &p, 1000 + i), i);
	assert_int_equal(throttle_read(f->db, "user:x", &p, 1045, &st), 0);
	assert_int_equal(st.retry_after_s, 5);
	assert_int_equal(throttle_read(f->db, "user:x", &p, 1050, &st), 0);
	assert_int_equal(st.retry_after_s, 0);
	/* an attempt taken back: one failure fewer, same last time */
	assert_int_equal(throttle_uncount(f->db, "user:x"), 0);
	assert_int_equal(throttle_read(f->db, "user:x", &p, 1050, &st), 0);
	assert_int_equal(st.failures, 39);
	/* Other keys are independent; clearing forgets. */
	assert_int_equal(throttle_read(f->db, "user:y", &p, 1500, &st), 0);
	assert_int_equal(st.failures, 0);
	for (int i = 0; i < 3; i++)
		throttle_count(f->db, "user:y", &p, 1500);
	throttle_clear(f->db, "user:y");
	assert_int_equal(throttle_read(f->db, "user:y", &p, 1500, &st), 0);
	assert_int_equal(st.failures, 0);
	assert_int_equal(throttle_uncount(f->db, "user:y"), 0); /* absent: no-op */
	/* Old failures age out after the window. */
	for (int i = 0; i < 3; i++)
		throttle_count(f->db, "user:z", &p, 0);
	assert_int_equal(throttle_read(f->db, "user:z", &p, 1, &st), 0);
	assert_int_equal(st.retry_after_s, 1);
	assert_int_equal(throttle_read(f->db, "user:z", &p, 900, &st), 0);
	assert_int_equal(st.failures, 0);
	assert_int_equal(throttle_count(f->db, "user:z", &p, 900), 1);
}

/* A lost audit entry is reported to the caller, not only logged. */
static void test_audit_add_reports_failure(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(audit_add(f->db, 1, "root", "user.create", "alice", "127.0.0.1", NULL), 0);
	db_lock(f->db);
	assert_true(db_exec(f->db, "DROP TABLE audit", "") >= 0);
	db_unlock(f->db);
	assert_int_equal(audit_add(f->db, 2, "root", "user.delete", "alice", NULL, NULL), -EIO);
}

struct walk {
	struct db *db;
	char names[4][16];
	int seen;
	int stop_after; /* 0 = visit every row */
};

static int walk_row(sqlite3_stmt *st, void *ctx)
{
	struct walk *w = ctx;
	struct user u;

	assert_true(w->seen < 4);
	snprintf(w->names[w->seen], sizeof(w->names[0]), "%s",
		 (const char *)sqlite3_column_text(st, 0));
	/* The store is usable from inside a walk: the lock is recursive. */
	assert_int_equal(users_find_by_name(w->db, w->names[w->seen], &u), 1);
	w->seen++;
	return w->stop_after && w->seen == w->stop_after;
}

/* db_each/db_one: rows in order, bound values, early stop, errors. */
static void test_db_each(void **state)
{
	struct fixture *f = *state;
	struct walk w = {.db = f->db};
	int n = -1;

	make_user(f->db, "dora", USER_ROLE_USER);
	make_user(f->db, "bob", USER_ROLE_ADMIN);
	make_user(f->db, "cy", USER_ROLE_USER);
	make_user(f->db, "al", USER_ROLE_USER);

	assert_int_equal(db_each(f->db, "SELECT name FROM users WHERE role = ? ORDER BY name", "t",
				 walk_row, &w, "user"),
			 3);
	assert_int_equal(w.seen, 3);
	assert_string_equal(w.names[0], "al");
	assert_string_equal(w.names[1], "cy");
	assert_string_equal(w.names[2], "dora");

	w = (struct walk){.db = f->db, .stop_after = 2};
	assert_int_equal(db_each(f->db, "SELECT name FROM users WHERE id > ? ORDER BY name DESC",
				 "i", walk_row, &w, (int64_t)0),
			 2);
	assert_int_equal(w.seen, 2);
	assert_string_equal(w.names[0], "dora");
	assert_string_equal(w.names[1], "cy");

	w = (struct walk){.db = f->db};
	assert_int_equal(db_each(f->db, "SELECT name FROM users WHERE name = ?", "t", walk_row,
				 &w, "nobody"),
			 0);
	assert_int_equal(w.seen, 0);

	/* db_one: the first row only. */
	assert_int_equal(db_one(f->db, "SELECT name FROM users ORDER BY name", "", walk_row, &w),
			 1);
	assert_int_equal(w.seen, 1);
	assert_string_equal(w.names[0], "al");
	assert_int_equal(db_one(f->db, "SELECT count(*) FROM users WHERE role = ? AND id > ?", "ti",
				db_row_int, &n, "user", (int64_t)1),
			 1);
	assert_int_equal(n, 2);
	assert_int_equal(db_one(f->db, "SELECT name FROM users WHERE name = ?", "t", walk_row, &w,
				"nobody"),
			 0);

	/* Errors: bad SQL, a bad binding type, a failing step. The lock is
	 * released on every path (the next call would hang otherwise). */
	w = (struct walk){.db = f->db};
	assert_int_equal(db_each(f->db, "SELEC name FROM users", "", walk_row, &w), -EIO);
	assert_int_equal(db_one(f->db, "SELECT name FROM no_such_table", "", walk_row, &w), -EIO);
	assert_int_equal(db_each(f->db, "SELECT name FROM users WHERE id = ?", "x", walk_row, &w),
			 -EIO);
	assert_int_equal(db_each(f->db, "SELECT abs(-9223372036854775807 - 1)", "", walk_row, &w),
			 -EIO);
	assert_int_equal(w.seen, 0);
	assert_int_equal(users_count(f->db), 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_migrations_apply_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_user_ids_never_reused_after_migration, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_plans_user_image, setup, teardown),
		cmocka_unit_test_setup_teardown(test_plans_gpu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_users_crud_and_conflict, setup, teardown),
		cmocka_unit_test_setup_teardown(test_last_admin_is_protected, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sessions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sessions_cascade_on_user_delete, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_tokens, setup, teardown),
		cmocka_unit_test_setup_teardown(test_generations, setup, teardown),
		cmocka_unit_test_setup_teardown(test_poll_external, setup, teardown),
		cmocka_unit_test_setup_teardown(test_throttle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_add_reports_failure, setup, teardown),
		cmocka_unit_test_setup_teardown(test_db_each, setup, teardown),
	};
	return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
