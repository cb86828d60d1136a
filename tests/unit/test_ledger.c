/* Unit tests of the usage ledger over a real SQLite file (store/ledger.c):
 * entries open and close with the runtime's state in one transaction, the
 * heartbeat, the close bound, recovery and account deletion. */
#include "unit.h"

#include <errno.h>
#include <time.h>

#include "store/db.h"
#include "store/gpu_queue.h"
#include "store/ledger.h"
#include "store/ledger_window.h"
#include "store/runtimes.h"
#include "store/users.h"

struct fixture {
	char dir[64];
	char path[128];
	struct db *db;
	int64_t uid;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct user u;

	assert_non_null(f);
	unit_tempdir(f->dir);
	snprintf(f->path, sizeof(f->path), "%s/labd.db", f->dir);
	assert_int_equal(db_open(f->path, &f->db), 0);
	assert_int_equal(users_create(f->db, "root", USER_ROLE_ADMIN, "$scrypt$x", 1, &u), 0);
	assert_int_equal(users_create(f->db, "ann", USER_ROLE_USER, "$scrypt$x", 1, &u), 0);
	f->uid = u.id;
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

struct seen {
	struct ledger_entry e[8];
	int n;
};

static int keep(const struct ledger_entry *e, void *ctx)
{
	struct seen *s = ctx;
	assert_true(s->n < 8);
	s->e[s->n++] = *e;
	return 0;
}

static struct seen entries(struct db *db, int64_t uid, int64_t from, int64_t to)
{
	struct seen s = {.n = 0};
	int n = ledger_each(db, uid, from, to, keep, &s);
	assert_int_equal(n, s.n);
	return s;
}

static int64_t running_runtime(struct fixture *f, enum runtime_kind kind, const char *gpus,
			       int64_t at)
{
	struct runtime r;
	assert_int_equal(runtimes_create(f->db, f->uid, kind, "tok", gpus, at - 5, at + 3600, &r), 0);
	assert_int_equal(runtimes_set_state(f->db, r.id, RUNTIME_RUNNING, NULL, at), 1);
	return r.id;
}

static void test_opens_when_running_closes_when_ended(void **state)
{
	struct fixture *f = *state;
	struct runtime r;
	struct seen s;

	assert_int_equal(runtimes_create(f->db, f->uid, RUNTIME_GPU, "tok", "3", 1000, 5000, &r), 0);
	assert_int_equal(entries(f->db, 0, 0, 10000).n, 0); /* starting is not billed */
	assert_int_equal(runtimes_set_state(f->db, r.id, RUNTIME_RUNNING, NULL, 1010), 1);
	s = entries(f->db, f->uid, 0, 10000);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.e[0].runtime_id, r.id);
	assert_string_equal(s.e[0].user_name, "ann");
	assert_int_equal(s.e[0].kind, RUNTIME_GPU);
	assert_string_equal(s.e[0].gpus, "3");
	assert_string_equal(s.e[0].plan, "default");
	assert_int_equal(s.e[0].start_at, 1010);
	assert_int_equal(s.e[0].end_at, 0);
	assert_int_equal(ledger_heartbeat(f->db, 1015), 1);
	assert_int_equal(runtimes_set_state(f->db, r.id, RUNTIME_STOPPING, "stopped by the user", 1018), 1);
	assert_int_equal(ledger_heartbeat(f->db, 1020), 1); /* stopping still holds the GPU */
	assert_int_equal(runtimes_set_state(f->db, r.id, RUNTIME_STOPPED, NULL, 1022), 1);
	s = entries(f->db, f->uid, 0, 10000);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.e[0].end_at, 1022);
	assert_int_equal(s.e[0].billable_s, 12);
	assert_string_equal(s.e[0].end_reason, "stopped by the user");
	assert_int_equal(ledger_heartbeat(f->db, 1030), 0); /* closed entries stay put */
	/* a runtime that fails while starting bills nothing */
	assert_int_equal(runtimes_create(f->db, f->uid, RUNTIME_CPU, "tok", "", 2000, 5000, &r), 0);
	assert_int_equal(runtimes_set_state(f->db, r.id, RUNTIME_FAILED, "no", 2001), 1);
	assert_int_equal(entries(f->db, 0, 0, 10000).n, 1);
}

static void test_heartbeat_and_close_bound(void **state)
{
	struct fixture *f = *state;
	int64_t id = running_runtime(f, RUNTIME_CPU, "", 1000);
	struct seen s;

	assert_int_equal(ledger_heartbeat(f->db, 1005), 1);
	s = entries(f->db, f->uid, 0, 10000);
	assert_int_equal(s.e[0].last_heartbeat, 1005);
	assert_int_equal(s.e[0].billable_s, 5);
	assert_int_equal(ledger_heartbeat(f->db, 1003), 1); /* a clock step back moves nothing back */
	assert_int_equal(entries(f->db, f->uid, 0, 10000).e[0].last_heartbeat, 1005);
	/* ended long after the last heartbeat (nobody watched): billed to the bound */
	assert_int_equal(runtimes_set_state(f->db, id, RUNTIME_FAILED, "gone", 5000), 1);
	s = entries(f->db, f->uid, 0, 10000);
	assert_int_equal(s.e[0].end_at, 1005 + LEDGER_CLOSE_SLACK_S);
	assert_int_equal(s.e[0].billable_s, 5 + LEDGER_CLOSE_SLACK_S);
	assert_string_equal(s.e[0].end_reason, "gone");
}

static void test_recover_closes_entries_of_dead_runtimes(void **state)
{
	struct fixture *f = *state;
	int64_t id = running_runtime(f, RUNTIME_CPU, "", 1000);
	struct seen s;

	assert_int_equal(ledger_heartbeat(f->db, 1040), 1);
	assert_int_equal(ledger_recover(f->db), 0); /* live runtime: its entry goes on */
	/* the row ended without the ledger hearing (a crash between processes,
	 * an older labd): recovery closes the entry at its last heartbeat */
	db_lock(f->db);
	assert_int_equal(db_exec(f->db, "UPDATE runtimes SET state = 'stopped' WHERE id = ?", "i", id), 1);
	db_unlock(f->db);
	assert_int_equal(ledger_recover(f->db), 1);
	s = entries(f->db, f->uid, 0, 10000);
	assert_int_equal(s.e[0].end_at, 1040);
	assert_int_equal(s.e[0].billable_s, 40);
	assert_string_equal(s.e[0].end_reason, "closed on recovery at its last heartbeat");
	assert_int_equal(ledger_recover(f->db), 0);
}

static void test_account_deletion_closes(void **state)
{
	struct fixture *f = *state;

	running_runtime(f, RUNTIME_CPU, "", time(NULL) - 10);
	assert_int_equal(users_delete(f->db, "ann"), USERS_OK);
	struct seen s = entries(f->db, f->uid, 0, INT64_MAX / 2);
	assert_int_equal(s.n, 1); /* the entry outlives the account */
	assert_true(s.e[0].end_at > 0);
	assert_string_equal(s.e[0].end_reason, "account deleted");
	assert_string_equal(s.e[0].user_name, "ann");
}

static void test_ledger_failure_undoes_the_state_change(void **state)
{
	struct fixture *f = *state;
	struct runtime r;

	assert_int_equal(runtimes_create(f->db, f->uid, RUNTIME_CPU, "tok", "", 1000, 5000, &r), 0);
	db_lock(f->db);
	assert_true(db_exec(f->db, "DROP TABLE ledger", "") >= 0);
	db_unlock(f->db);
	assert_int_equal(runtimes_set_state(f->db, r.id, RUNTIME_RUNNING, NULL, 1010), -1);
	assert_int_equal(runtimes_live(f->db, f->uid, &r), 1);
	assert_int_equal(r.state, RUNTIME_STARTING); /* not running unbilled */
	assert_int_equal(ledger_heartbeat(f->db, 1020), -EIO);
	assert_int_equal(ledger_recover(f->db), -EIO);
}

static void test_each_overlaps_window(void **state)
{
	struct fixture *f = *state;
	int64_t id = running_runtime(f, RUNTIME_CPU, "", 1000);
	struct ledger_span span;

	assert_int_equal(runtimes_set_state(f->db, id, RUNTIME_STOPPED, "done", 1020), 1);
	running_runtime(f, RUNTIME_GPU, "0", 2000);
	assert_int_equal(ledger_heartbeat(f->db, 2010), 1);
	assert_int_equal(entries(f->db, f->uid, 0, 1000).n, 0);    /* ends at its start */
	assert_int_equal(entries(f->db, f->uid, 1020, 2000).n, 0); /* between the two */
	assert_int_equal(entries(f->db, f->uid, 1019, 2001).n, 2);
	assert_int_equal(entries(f->db, f->uid, 2010, 3000).n, 0); /* open: to its heartbeat */
	struct seen s = entries(f->db, 0, 0, 3000);
	assert_int_equal(s.n, 2);
	ledger_entry_span(&s.e[1], &span);
	assert_int_equal(span.start_s, 2000);
	assert_int_equal(span.end_s, 2010);
	assert_int_equal(span.gpus, 1); /* "0" */
	snprintf(s.e[1].gpus, sizeof(s.e[1].gpus), "1,2,5");
	ledger_entry_span(&s.e[1], &span);
	assert_int_equal(span.gpus, 3);
	ledger_entry_span(&s.e[0], &span);
	assert_int_equal(span.gpus, 0); /* a cpu entry */
	assert_int_equal(entries(f->db, f->uid + 1, 0, 3000).n, 0);
}

/* An entry keeps the fraction of a card its devices are (schema 20): a
 * runtime started on a quarter share through the queue opens an entry of
 * 250 thousandths, charged a quarter of each GPU-second; a whole card's
 * and a CPU runtime's are 1000. */
static void test_entry_keeps_its_fraction(void **state)
{
	struct fixture *f = *state;
	struct runtime r;
	struct ledger_span span;

	assert_int_equal(gpu_queue_add(f->db, f->uid, "tok", "share", 1000, 3600, 5000, &r), 0);
	assert_int_equal(gpu_queue_take(f->db, r.id, "131328", 250, 1000, 4600), 1);
	assert_int_equal(runtimes_set_state(f->db, r.id, RUNTIME_RUNNING, NULL, 1000), 1);
	assert_int_equal(ledger_heartbeat(f->db, 1400), 1);
	assert_int_equal(runtimes_set_state(f->db, r.id, RUNTIME_STOPPED, "done", 1400), 1);
	running_runtime(f, RUNTIME_GPU, "0", 2000);
	assert_int_equal(ledger_heartbeat(f->db, 2400), 1);
	struct seen s = entries(f->db, f->uid, 0, 3000);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.e[0].fraction_milli, 250);
	assert_string_equal(s.e[0].gpus, "131328");
	ledger_entry_span(&s.e[0], &span);
	assert_int_equal(span.fraction_milli, 250);
	assert_int_equal(ledger_clip_s(&span, 0, 3000), 100); /* 400 s on a quarter */
	assert_int_equal(s.e[1].fraction_milli, 1000);
	ledger_entry_span(&s.e[1], &span);
	assert_int_equal(ledger_clip_s(&span, 0, 3000), 400);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_opens_when_running_closes_when_ended, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_entry_keeps_its_fraction, setup, teardown),
		cmocka_unit_test_setup_teardown(test_heartbeat_and_close_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recover_closes_entries_of_dead_runtimes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_account_deletion_closes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ledger_failure_undoes_the_state_change, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_each_overlaps_window, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
