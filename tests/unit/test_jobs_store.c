/* Unit tests of job and pool rows over a real SQLite file (store/jobs.c,
 * store/pools.c): create with the concurrent cap, moves and their
 * transitions, the job and warm ledger entries, pool matching. */
#include "unit.h"

#include <string.h>

#include "store/db.h"
#include "store/jobs.h"
#include "store/ledger.h"
#include "store/ledger_window.h"
#include "store/pools.h"
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

static int create(struct fixture *f, const char *name, int64_t max_live, int64_t now_ms,
		  struct job *out)
{
	struct job_new n = {.user_id = f->uid, .name = name, .spec = "{\"command\":[\"sh\"]}",
			    .image = "", .max_runtime_s = 60, .max_wait_s = 60, .grace_s = 5,
			    .keep_alive_s = 30, .now_ms = now_ms, .max_live = max_live};
	return jobs_create(f->db, &n, out);
}

static int count_transitions(const struct job_transition *t, void *ctx)
{
	(void)t;
	++*(int *)ctx;
	return 0;
}

static void test_create_and_cap(void **state)
{
	struct fixture *f = *state;
	struct job j, k;

	assert_int_equal(create(f, "a", 1, 1000000, &j), 0);
	assert_int_equal(j.status, JOB_IN_PROGRESS);
	assert_int_equal(j.secondary, JOB_PENDING);
	assert_string_equal(j.spec, "{\"command\":[\"sh\"]}");
	assert_int_equal(j.attempt, 1);
	assert_int_equal(j.exit_code, -1);
	assert_int_equal(create(f, "b", 1, 1000000, &k), JOBS_CREATE_QUOTA);
	assert_int_equal(create(f, "a", -1, 1000000, &k), DB_CONFLICT);
	assert_int_equal(jobs_count_live(f->db, f->uid), 1);
	jobs_row_free(&j);
}

static void test_moves_bill_and_warm(void **state)
{
	struct fixture *f = *state;
	struct pool_shape shape = {.user_id = f->uid, .size = {.image = "", .memory_bytes = 1 << 30}};
	struct job j;
	struct pool p, q;
	int n = 0;

	assert_int_equal(create(f, "run", -1, 1000000, &j), 0);
	assert_int_equal(pools_create(f->db, &shape, "", j.id, 1000, 99999, &p), 0);
	struct job_move m = {.status = JOB_IN_PROGRESS, .secondary = JOB_STARTING,
			     .at_ms = 1001000, .pool_id = p.id, .message = "building"};
	assert_int_equal(jobs_move(f->db, j.id, &m), 1);
	m = (struct job_move){.status = JOB_IN_PROGRESS, .secondary = JOB_TRAINING,
			      .at_ms = 1003000, .message = "runs"};
	assert_int_equal(jobs_move(f->db, j.id, &m), 1);
	/* a phase that would go back is refused by its from_mask */
	m = (struct job_move){.status = JOB_IN_PROGRESS, .secondary = JOB_DOWNLOADING,
			      .at_ms = 1004000, .from_mask = 1u << JOB_STARTING};
	assert_int_equal(jobs_move(f->db, j.id, &m), 0);
	m = (struct job_move){.status = JOB_COMPLETED, .secondary = JOB_S_COMPLETED,
			      .at_ms = 1011000, .set_exit = true, .exit_code = 0};
	assert_int_equal(jobs_move(f->db, j.id, &m), 1);
	jobs_row_free(&j);
	assert_int_equal(jobs_find(f->db, j.id, &j), 1);
	assert_int_equal(j.status, JOB_COMPLETED);
	assert_int_equal(j.exit_code, 0);
	assert_int_equal(j.started_at, 1001);
	assert_int_equal(j.ended_at, 1011);
	assert_int_equal(j.training_ms, 8000);
	assert_int_equal(j.pool_id, p.id);
	assert_int_equal(jobs_billable_s(f->db, j.id, 2000), 10); /* Starting .. the end */
	assert_int_equal(jobs_each_transition(f->db, j.id, count_transitions, &n), 4);
	/* a moved job that is over moves no more */
	m = (struct job_move){.status = JOB_FAILED, .secondary = JOB_S_FAILED, .at_ms = 1012000};
	assert_int_equal(jobs_move(f->db, j.id, &m), 0);
	jobs_row_free(&j);

	/* the pool: ready, then warm; a job of its shape finds it, another does not */
	assert_int_equal(pools_set_ready(f->db, p.id), 1);
	assert_int_equal(pools_release(f->db, p.id, 1040, 1011, true), 1);
	assert_int_equal(pools_find_available(f->db, &shape, 2000, 1020, &q), 1);
	assert_int_equal(q.id, p.id);
	assert_int_equal(q.last_job_id, j.id);
	assert_int_equal(pools_find_available(f->db, &shape, 2000, 1040, &q), 0); /* expired */
	shape.size.memory_bytes = 2LL << 30;
	assert_int_equal(pools_find_available(f->db, &shape, 2000, 1020, &q), 0);
	assert_int_equal(pools_take(f->db, p.id, 77, 1021), 1);
	assert_int_equal(pools_take(f->db, p.id, 78, 1021), 0);
	assert_int_equal(pools_warm_s(f->db, p.id, 5000), 10);
	assert_int_equal(pools_end(f->db, p.id, "done", 1030), 1);
	assert_int_equal(pools_end(f->db, p.id, "done", 1030), 0);
	assert_int_equal(pools_count_live(f->db, f->uid), 0);
}

static void test_retry_opens_a_new_entry(void **state)
{
	struct fixture *f = *state;
	struct job j;

	assert_int_equal(create(f, "retry", -1, 1000000, &j), 0);
	struct job_move m = {.status = JOB_IN_PROGRESS, .secondary = JOB_STARTING,
			     .at_ms = 1000000, .pool_id = 5};
	assert_int_equal(jobs_move(f->db, j.id, &m), 1);
	m = (struct job_move){.status = JOB_IN_PROGRESS, .secondary = JOB_STARTING,
			      .at_ms = 1004000, .next_attempt = true, .clear_pool = true};
	assert_int_equal(jobs_move(f->db, j.id, &m), 1);
	m = (struct job_move){.status = JOB_FAILED, .secondary = JOB_INTERRUPTED, .at_ms = 1010000,
			      .failure = "lost"};
	assert_int_equal(jobs_move(f->db, j.id, &m), 1);
	jobs_row_free(&j);
	assert_int_equal(jobs_find(f->db, j.id, &j), 1);
	assert_int_equal(j.attempt, 2);
	assert_int_equal(j.pool_id, 0);
	assert_string_equal(j.failure_reason, "lost");
	assert_int_equal(jobs_billable_s(f->db, j.id, 2000), 10); /* 4 + 6 in two entries */
	jobs_row_free(&j);
}

static int count_interruption(const struct job_interruption *x, void *ctx)
{
	struct job_interruption *out = ctx;

	*out = *x;
	return 0;
}

static int entry_rate(const struct ledger_entry *e, void *ctx)
{
	assert_string_equal(e->capacity, "preemptible");
	*(double *)ctx = e->rate;
	return 0;
}

static void move(struct fixture *f, int64_t id, enum job_secondary s, int64_t at_s)
{
	struct job_move m = {.status = s == JOB_S_COMPLETED ? JOB_COMPLETED : JOB_IN_PROGRESS,
			     .secondary = s, .at_ms = at_s * 1000, .pool_id = s == JOB_STARTING ? 7 : 0};
	assert_int_equal(jobs_move(f->db, id, &m), 1);
}

/* A preemption: begun once (only for a preemptible job), the job back in
 * Pending without a retry used; its interruption's times; the resumed
 * attempt's Starting and Downloading are not billed; entries bill the
 * preemptible rate (docs/jobs.md "Preemptible capacity"). */
static void test_preemption_requeues_and_bills_one_download(void **state)
{
	struct fixture *f = *state;
	struct job_new n = {.user_id = f->uid, .name = "spot", .spec = "{}", .image = "",
			    .max_runtime_s = 60, .max_wait_s = 60, .grace_s = 5, .now_ms = 999000,
			    .max_live = -1, .preemptible = true};
	struct job_interruption x;
	struct job j, od;
	double rate = 0;

	assert_int_equal(jobs_create(f->db, &n, &j), 0);
	assert_true(j.preemptible);
	assert_int_equal(create(f, "od", -1, 999000, &od), 0);
	assert_false(od.preemptible);
	assert_int_equal(jobs_preempt_begin(f->db, od.id, "someone", 1005000), 0);
	move(f, j.id, JOB_STARTING, 1000);
	move(f, j.id, JOB_TRAINING, 1004);
	assert_int_equal(jobs_set_run_sent(f->db, j.id, true), 0);
	assert_int_equal(jobs_preempt_begin(f->db, j.id, "a GPU runtime of bob", 1007000), 1);
	assert_int_equal(jobs_preempt_begin(f->db, j.id, "again", 1008000), 0); /* once */
	struct job_move m = {.status = JOB_IN_PROGRESS, .secondary = JOB_PENDING,
			     .at_ms = 1010000, .clear_pool = true, .preempted = true};
	assert_int_equal(jobs_move(f->db, j.id, &m), 1);
	jobs_row_free(&j);
	assert_int_equal(jobs_find(f->db, j.id, &j), 1);
	assert_int_equal(j.secondary, JOB_PENDING);
	assert_int_equal(j.attempt, 1);
	assert_int_equal(j.preemptions, 1);
	assert_string_equal(j.preempting, "");
	assert_false(j.run_sent);
	assert_int_equal(j.pool_id, 0);
	jobs_row_free(&j);
	move(f, j.id, JOB_STARTING, 1020);
	move(f, j.id, JOB_DOWNLOADING, 1025);
	move(f, j.id, JOB_TRAINING, 1030);
	move(f, j.id, JOB_S_COMPLETED, 1040);
	assert_int_equal(jobs_each_interruption(f->db, j.id, count_interruption, &x), 1);
	assert_string_equal(x.reason, "Preempted");
	assert_string_equal(x.waiting, "a GPU runtime of bob");
	assert_int_equal(x.at_ms, 1007000);
	assert_int_equal(x.requeued_at_ms, 1010000);
	assert_int_equal(x.resumed_at_ms, 1020000);
	/* 1000..1010 and 1030..1040: the second download is not billed */
	assert_int_equal(jobs_billable_s(f->db, j.id, 2000), 20);
	assert_int_equal(jobs_charged_s(f->db, j.id, 2000), 6); /* at the default 0.3 */
	assert_int_equal(ledger_each(f->db, f->uid, 0, 5000, entry_rate, &rate), 2);
	assert_true(rate > 0.29 && rate < 0.31);
	jobs_row_free(&od);
}

/* A job on two hosts runs two sandboxes: each of its seconds bills two. */
/* The job's entry's seconds in a quota window: each counted once per host. */
static int window_of_job(const struct ledger_entry *e, void *ctx)
{
	int64_t *got = ctx;
	struct ledger_span span;

	if (e->job_id == got[0]) {
		ledger_entry_span(e, &span);
		got[1] = e->hosts;
		got[2] = ledger_clip_s(&span, 0, 5000);
	}
	return 0;
}

static void test_several_hosts_bill_each(void **state)
{
	struct fixture *f = *state;
	struct job_new n = {.user_id = f->uid, .name = "two", .spec = "{\"instance_count\":2}",
			    .image = "", .max_runtime_s = 60, .max_wait_s = 60, .grace_s = 5,
			    .now_ms = 999000, .max_live = -1};
	struct job j, one;

	assert_int_equal(jobs_create(f->db, &n, &j), 0);
	move(f, j.id, JOB_STARTING, 1000);
	move(f, j.id, JOB_TRAINING, 1004);
	move(f, j.id, JOB_S_COMPLETED, 1010);
	assert_int_equal(jobs_billable_s(f->db, j.id, 2000), 10);
	assert_int_equal(jobs_charged_s(f->db, j.id, 2000), 20);
	/* the quota windows count it as the bill does (schema 21's hosts) */
	int64_t got[3] = {j.id, 0, 0};
	assert_true(ledger_each(f->db, f->uid, 0, 5000, window_of_job, got) >= 0);
	assert_int_equal(got[1], 2);
	assert_int_equal(got[2], 20); /* 2 x its 10 billed seconds, as charged */
	/* one host, as before */
	assert_int_equal(create(f, "one", -1, 999000, &one), 0);
	move(f, one.id, JOB_STARTING, 1000);
	move(f, one.id, JOB_S_COMPLETED, 1010);
	assert_int_equal(jobs_charged_s(f->db, one.id, 2000), 10);
	jobs_row_free(&j);
	jobs_row_free(&one);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_create_and_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_moves_bill_and_warm, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retry_opens_a_new_entry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_preemption_requeues_and_bills_one_download,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_several_hosts_bill_each, setup, teardown),
	};
	return cmocka_run_group_tests_name("jobs_store", tests, NULL, NULL);
}
