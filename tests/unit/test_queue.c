/* Unit tests of the GPU queue: the fair order and the estimates
 * (sched/queue.c, pure), and its rows over a real SQLite file
 * (store/gpu_queue.c): a queued row and its entry move together, one live
 * runtime per user holds for queued rows, usage of the last 24 h orders it. */
#include "unit.h"

#include <errno.h>

#include "sched/queue.h"
#include "store/db.h"
#include "store/gpu_queue.h"
#include "store/jobs.h"
#include "config/config.h"
#include "store/migrations.h"
#include "store/ledger.h"
#include "store/pools.h"
#include "store/runtimes.h"
#include "store/users.h"

#define H 3600

static void test_order_less_use_first_then_arrival(void **state)
{
	(void)state;
	struct queue_item it[] = {
		{.runtime_id = 1, .queued_at = 100, .gpu_s_24h = 2 * H},
		{.runtime_id = 2, .queued_at = 200, .gpu_s_24h = 0},
		{.runtime_id = 3, .queued_at = 150, .gpu_s_24h = 0},
		{.runtime_id = 5, .queued_at = 300, .gpu_s_24h = H},
		{.runtime_id = 4, .queued_at = 300, .gpu_s_24h = H}, /* same second: lower id first */
	};
	queue_order(it, 5);
	int64_t want[] = {3, 2, 4, 5, 1};
	for (int i = 0; i < 5; i++)
		assert_int_equal(it[i].runtime_id, want[i]);
	queue_order(it, 0); /* nothing to do */
}

/* GPU jobs wait in the same order; a job goes when everyone ahead could go too. */
static void test_jobs_take_their_turn(void **state)
{
	struct queue_item it[] = {
		{.job_id = 7, .user_id = 1, .queued_at = 100, .gpu_s_24h = 50, .gpus = 2},
		{.runtime_id = 3, .user_id = 2, .queued_at = 200, .gpu_s_24h = 0, .gpus = 1},
		{.job_id = 8, .user_id = 3, .queued_at = 50, .gpu_s_24h = 50, .gpus = 1},
	};
	(void)state;

	queue_order(it, 3);
	assert_int_equal(it[0].runtime_id, 3); /* no GPU time: first */
	assert_int_equal(it[1].job_id, 8);     /* equal use: the earlier request */
	assert_int_equal(it[2].job_id, 7);
	assert_false(queue_job_turn(it, 3, 8, 1, NULL, 0)); /* the runtime ahead takes the one free */
	assert_true(queue_job_turn(it, 3, 8, 2, NULL, 0));
	assert_false(queue_job_turn(it, 3, 7, 3, NULL, 0)); /* 1 + 1 ahead, it needs 2 */
	assert_true(queue_job_turn(it, 3, 7, 4, NULL, 0));
	assert_false(queue_job_turn(it, 3, 99, 8, NULL, 0)); /* not waiting */
	/* user 3's job is held back by caps of its own: it takes no GPU ahead of 7 */
	int64_t excused[] = {3};
	assert_true(queue_job_turn(it, 3, 7, 3, excused, 1));
	excused[0] = 2; /* a runtime is never excused: it starts on its own */
	assert_false(queue_job_turn(it, 3, 7, 3, excused, 1));
}

/* A GPU runtime waits behind a GPU job ahead of it in the order: one GPU
 * free while the 2-GPU job ahead waits for two is not the runtime's. */
static void test_a_runtime_never_overtakes_a_job_ahead(void **state)
{
	struct queue_item it[] = {
		{.runtime_id = 3, .user_id = 2, .queued_at = 200, .gpu_s_24h = 0, .gpus = 1},
		{.job_id = 7, .user_id = 1, .queued_at = 100, .gpu_s_24h = 0, .gpus = 2},
	};
	int64_t excused[] = {1};
	(void)state;

	queue_order(it, 2);
	assert_int_equal(it[0].job_id, 7); /* equal use: the earlier request */
	assert_false(queue_runtime_turn(it, 2, 3, 1, NULL, 0));
	assert_false(queue_runtime_turn(it, 2, 3, 2, NULL, 0));
	assert_true(queue_runtime_turn(it, 2, 3, 3, NULL, 0)); /* enough for both */
	assert_false(queue_runtime_turn(it, 2, 7, 3, NULL, 0)); /* 7 is a job, not a runtime */
	assert_false(queue_runtime_turn(it, 2, 4, 3, NULL, 0)); /* not queued */
	/* user 1's caps hold its job back: it takes no GPU, the runtime goes */
	assert_true(queue_runtime_turn(it, 2, 3, 1, excused, 1));
	/* the runtime's own entry ahead of a job: the job waits for both */
	it[0].gpu_s_24h = 9; /* the job's user used more */
	queue_order(it, 2);
	assert_true(queue_runtime_turn(it, 2, 3, 1, NULL, 0));
	assert_false(queue_job_turn(it, 2, 7, 2, NULL, 0));
}

/* The queue is kept per kind of device: a share waits only behind shares, a
 * 1g.18gb instance only behind 1g.18gb instances, a whole card only behind
 * whole cards, whatever the order across kinds says. */
static void test_each_kind_waits_apart(void **state)
{
	struct queue_item it[] = {
		{.job_id = 7, .user_id = 1, .queued_at = 100, .gpus = 2},		   /* whole */
		{.runtime_id = 3, .user_id = 2, .queued_at = 200, .kind = "share"},
		{.job_id = 8, .user_id = 3, .queued_at = 300, .gpus = 1, .kind = "1g.18gb"},
		{.runtime_id = 4, .user_id = 4, .queued_at = 400, .kind = "share"},
		{.runtime_id = 5, .user_id = 5, .queued_at = 500, .kind = "whole"},
	};
	(void)state;

	queue_order(it, 5);
	assert_true(queue_is_kind(&it[0], "whole")); /* "" reads as whole */
	assert_true(queue_is_kind(&it[4], NULL));
	assert_false(queue_is_kind(&it[1], "whole"));
	/* one share free: the first share's, though a 2-card job waits ahead of it */
	assert_true(queue_runtime_turn(it, 5, 3, 1, NULL, 0));
	assert_false(queue_runtime_turn(it, 5, 4, 1, NULL, 0)); /* behind runtime 3 */
	assert_true(queue_runtime_turn(it, 5, 4, 2, NULL, 0));
	/* one instance free: the 1g.18gb job's, ahead of it only other kinds */
	assert_true(queue_job_turn(it, 5, 8, 1, NULL, 0));
	assert_false(queue_job_turn(it, 5, 8, 0, NULL, 0));
	/* whole cards: runtime 5 waits behind job 7's two cards, not behind shares */
	assert_false(queue_runtime_turn(it, 5, 5, 2, NULL, 0));
	assert_true(queue_runtime_turn(it, 5, 5, 3, NULL, 0));
	int64_t excused[] = {1};
	assert_true(queue_runtime_turn(it, 5, 5, 1, excused, 1));
}

/* Places and estimates count within a kind: two shares and a whole card
 * waiting are share 1, share 2 and whole 1, each estimated on its own devices. */
static void test_places_and_estimates_per_kind(void **state)
{
	struct queue_item it[] = {
		{.runtime_id = 1, .length_s = 100, .kind = "share"},
		{.runtime_id = 2, .length_s = 100},
		{.runtime_id = 3, .length_s = 50, .kind = "share"},
	};
	const int64_t shares_free_at[] = {1000}, cards_free_at[] = {2000};
	(void)state;

	queue_estimate(it, 3, "share", shares_free_at, 1, 500);
	assert_int_equal(it[0].position, 1);
	assert_int_equal(it[2].position, 2);
	assert_int_equal(it[1].position, 0); /* another kind: untouched */
	assert_int_equal(it[0].estimate_at, 1000);
	assert_int_equal(it[2].estimate_at, 1100); /* after the first share's 100 s */
	queue_estimate(it, 3, "whole", cards_free_at, 1, 500);
	assert_int_equal(it[1].position, 1);
	assert_int_equal(it[1].estimate_at, 2000);
	assert_int_equal(it[2].estimate_at, 1100); /* the shares' stay */
	queue_estimate(it, 3, "1g.18gb", NULL, 0, 500); /* nobody waits for that kind */
	assert_int_equal(it[0].position, 1);
}

static void test_estimates_follow_the_holders_and_lengths(void **state)
{
	(void)state;
	struct queue_item it[4] = {
		{.length_s = 100}, {.length_s = 50}, {.length_s = 10}, {.length_s = 10}};
	/* two GPUs: one frees at 1000, the other at 1200 */
	const int64_t free_at[] = {1200, 1000};
	queue_estimate(it, 4, NULL, free_at, 2, 500);
	for (int i = 0; i < 4; i++)
		assert_int_equal(it[i].position, i + 1);
	assert_int_equal(it[0].estimate_at, 1000); /* the earlier GPU, then busy until 1100 */
	assert_int_equal(it[1].estimate_at, 1100);
	assert_int_equal(it[2].estimate_at, 1150);
	assert_int_equal(it[3].estimate_at, 1160);
	/* a free GPU (or a deadline already past) means now */
	const int64_t past[] = {400};
	queue_estimate(it, 2, NULL, past, 1, 500);
	assert_int_equal(it[0].estimate_at, 500);
	assert_int_equal(it[1].estimate_at, 600);
	/* a 2-GPU job waits for both and holds both: who follows waits for its end */
	struct queue_item two[3] = {{.length_s = 100, .gpus = 2}, {.length_s = 10}, {.length_s = 10, .gpus = 3}};
	queue_estimate(two, 3, NULL, free_at, 2, 500);
	assert_int_equal(two[0].estimate_at, 1200); /* the later of the two */
	assert_int_equal(two[1].estimate_at, 1300);
	assert_int_equal(two[2].estimate_at, 0); /* more GPUs than the pool has */
	/* no GPU at all: positions, no estimate */
	queue_estimate(it, 2, NULL, NULL, 0, 500);
	assert_int_equal(it[1].position, 2);
	assert_int_equal(it[0].estimate_at, 0);
	assert_int_equal(it[1].estimate_at, 0);
}

#include "store_fixture.h"

static const char TOKEN[] = "ttttttttttttttttttttttttttttttttttttttttttt";

static int count(const struct gpu_queue_entry *e, void *ctx)
{
	(void)e;
	++*(int *)ctx;
	return 0;
}

static int entries(struct db *db)
{
	int n = 0, rc = gpu_queue_each(db, count, &n);
	assert_int_equal(rc, n);
	return n;
}

static void test_rows_move_with_their_entry(void **state)
{
	struct fixture *f = *state;
	struct runtime r, again;

	assert_int_equal(gpu_queue_add(f->db, f->ann, TOKEN, "whole", 1000, 4 * H, 1000 + 1800, &r), 0);
	assert_int_equal(r.state, RUNTIME_QUEUED);
	assert_string_equal(runtimes_state_name(r.state), "queued");
	assert_true(runtimes_state_live(r.state));
	assert_int_equal(r.queued_at, 1000);
	assert_int_equal(r.queue_expires_at, 2800);
	assert_int_equal(r.deadline - r.created_at, 4 * H);
	/* a place at the end until the queue's pass computes it, never 0 */
	assert_int_equal(runtimes_live(f->db, f->ann, &again), 1);
	assert_int_equal(again.queue_position, 1);
	/* one live runtime per user, queued included */
	assert_int_equal(gpu_queue_add(f->db, f->ann, TOKEN, "whole", 1001, H, 2000, &again), DB_CONFLICT);
	assert_int_equal(runtimes_create(f->db, f->ann, RUNTIME_CPU, TOKEN, "", 1001, 2000, &again),
			 DB_CONFLICT);
	assert_int_equal(entries(f->db), 1);
	/* places are written only when they change */
	assert_int_equal(gpu_queue_set_place(f->db, r.id, 1, 5000), 1);
	assert_int_equal(gpu_queue_set_place(f->db, r.id, 1, 5000), 0);
	assert_int_equal(runtimes_live(f->db, f->ann, &again), 1);
	assert_int_equal(again.queue_position, 1);
	assert_int_equal(again.queue_estimate_at, 5000);
	/* taken: starting on GPU 0 with a fresh clock, no entry left */
	assert_int_equal(gpu_queue_take(f->db, r.id, "0", 1000, 1500, 1500 + 4 * H), 1);
	assert_int_equal(gpu_queue_take(f->db, r.id, "0", 1000, 1500, 1500 + 4 * H), 0);
	assert_int_equal(runtimes_live(f->db, f->ann, &again), 1);
	assert_int_equal(again.state, RUNTIME_STARTING);
	assert_string_equal(again.gpus, "0");
	assert_int_equal(again.created_at, 1500);
	assert_int_equal(again.queued_at, 0);
	assert_int_equal(entries(f->db), 0);
	/* put back (the GPU was still held): queued again with its old times */
	assert_int_equal(gpu_queue_put_back(f->db, r.id, 1000, 2800), 1);
	assert_int_equal(runtimes_live(f->db, f->ann, &again), 1);
	assert_int_equal(again.state, RUNTIME_QUEUED);
	assert_string_equal(again.gpus, "");
	assert_int_equal(again.queued_at, 1000);
	assert_int_equal(again.queue_position, 1);
	/* ending it (cancel) removes the entry in the same transaction */
	assert_int_equal(runtimes_set_state(f->db, r.id, RUNTIME_STOPPED, "cancelled while queued",
					    1600),
			 1);
	assert_int_equal(entries(f->db), 0);
	assert_int_equal(runtimes_latest(f->db, f->ann, &again), 1);
	assert_int_equal(again.state, RUNTIME_STOPPED);
	assert_int_equal(again.queue_position, 0);
}

static void test_load_reads_use_of_the_last_24h(void **state)
{
	struct fixture *f = *state;
	struct runtime r;
	struct queue_item it[4];
	int64_t now = 10 * 86400;

	/* ann used a GPU for 2 h, ending 1 h ago; bob for 5 h ending 25 h ago */
	db_lock(f->db);
	assert_int_equal(db_exec(f->db,
				 "INSERT INTO ledger (user_id, user_name, kind, plan, start_at, end_at,"
				 " billable_s, last_heartbeat) VALUES"
				 " (?, 'ann', 'gpu', 'default', ?, ?, 7200, ?),"
				 " (?, 'bob', 'gpu', 'default', ?, ?, 18000, ?),"
				 " (?, 'bob', 'cpu', 'default', ?, ?, 3000, ?)",
				 "iiiiiiiiiiii", f->ann, now - 3 * H, now - H, now - H, f->bob,
				 now - 30 * H, now - 25 * H, now - 25 * H, f->bob, now - 2 * H,
				 now - H, now - H),
			 3);
	db_unlock(f->db);
	assert_int_equal(gpu_queue_add(f->db, f->ann, TOKEN, "whole", now - 20, H, now + 100, &r), 0);
	assert_int_equal(gpu_queue_add(f->db, f->bob, TOKEN, "whole", now - 10, H, now + 100, &r), 0);
	assert_int_equal(queue_load(f->db, now, it, 4), 2);
	assert_int_equal(it[0].user_id, f->ann); /* arrival order */
	assert_int_equal(it[0].gpu_s_24h, 7200);
	assert_int_equal(it[1].gpu_s_24h, 0); /* outside the window, or not a GPU */
	assert_int_equal(it[1].length_s, H);
	queue_order(it, 2);
	assert_int_equal(it[0].user_id, f->bob);
	/* a bound: at most max entries */
	assert_int_equal(queue_load(f->db, now, it, 1), 1);
}

/* A second on N GPUs weighs N: bob's 1.5 h on two GPUs is more than ann's 2 h on
 * one, so ann goes first though bob queued first and ran for less wall time. */
static void test_load_weighs_each_gpu(void **state)
{
	struct fixture *f = *state;
	struct runtime r;
	struct queue_item it[2];
	int64_t now = 10 * 86400;

	db_lock(f->db);
	assert_int_equal(db_exec(f->db,
				 "INSERT INTO ledger (user_id, user_name, kind, gpus, plan, start_at,"
				 " end_at, billable_s, last_heartbeat) VALUES"
				 " (?, 'ann', 'gpu', '0', 'default', ?, ?, 7200, ?),"
				 " (?, 'bob', 'gpu', '0,1', 'default', ?, ?, 5400, ?)",
				 "iiiiiiii", f->ann, now - 3 * H, now - H, now - H, f->bob,
				 now - 3 * H, now - 3 * H / 2, now - 3 * H / 2),
			 2);
	db_unlock(f->db);
	assert_int_equal(gpu_queue_add(f->db, f->bob, TOKEN, "whole", now - 20, H, now + 100, &r), 0);
	assert_int_equal(gpu_queue_add(f->db, f->ann, TOKEN, "whole", now - 10, H, now + 100, &r), 0);
	assert_int_equal(queue_load(f->db, now, it, 2), 2);
	assert_int_equal(it[0].gpu_s_24h, 2 * 5400);
	assert_int_equal(it[1].gpu_s_24h, 7200);
	queue_order(it, 2);
	assert_int_equal(it[0].user_id, f->ann);
}

/* A GPU entry still open weighs up to now (what closing it would bill), not
 * up to its last heartbeat: a user whose GPU jobs are running does not go
 * ahead of one who waits with none. One whose heartbeat stopped (a crash)
 * weighs up to its heartbeat + the close slack, as billing closes it. */
static void test_load_counts_open_entries_up_to_now(void **state)
{
	struct fixture *f = *state;
	struct runtime r;
	struct queue_item it[4];
	int64_t now = 10 * 86400;

	db_lock(f->db);
	assert_int_equal(db_exec(f->db,
				 "INSERT INTO ledger (user_id, user_name, kind, plan, start_at,"
				 " last_heartbeat) VALUES (?, 'ann', 'gpu', 'default', ?, ?),"
				 " (?, 'bob', 'gpu', 'default', ?, ?)",
				 "iiiiii", f->ann, now - 4, now - 4, f->bob, now - H, now - H + 60),
			 2);
	db_unlock(f->db);
	assert_int_equal(gpu_queue_add(f->db, f->ann, TOKEN, "whole", now - 20, H, now + 100, &r), 0);
	assert_int_equal(gpu_queue_add(f->db, f->bob, TOKEN, "whole", now - 10, H, now + 100, &r), 0);
	assert_int_equal(queue_load(f->db, now, it, 4), 2);
	assert_int_equal(it[0].user_id, f->ann);
	assert_int_equal(it[0].gpu_s_24h, 4); /* opened 4 s ago, no heartbeat yet */
	assert_int_equal(it[1].gpu_s_24h, 60 + LEDGER_CLOSE_SLACK_S);
}

/* n GPU jobs of user waiting (Pending), created a second apart from created_at. */
static void add_waiting_jobs(struct fixture *f, int64_t user, int n, int64_t created_at,
			     int64_t max_wait_s)
{
	char name[16];

	db_lock(f->db);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "j%d", i);
		assert_int_equal(db_exec(f->db,
					 "INSERT INTO jobs (user_id, name, status, secondary, spec, kind,"
					 " gpu_count, max_runtime_s, max_wait_s, grace_s, created_at)"
					 " VALUES (?, ?, 'InProgress', 'Pending', '{}', 'gpu', 1, 60,"
					 " ?, 1, ?)",
					 "itii", user, name, max_wait_s, created_at + i),
				 1);
	}
	db_unlock(f->db);
}

/* A pass reads a bounded number of waiting entries: ann's 70 GPU jobs, all
 * submitted before bob's one, must not hide bob's from a pass of 64 (the
 * fair order is taken among users' heads, not among the 64 oldest jobs). */
static void test_load_sees_every_users_head_job(void **state)
{
	struct fixture *f = *state;
	struct queue_item it[64];
	int64_t now = 10 * 86400;

	add_waiting_jobs(f, f->ann, 70, now - 100, 3600);
	add_waiting_jobs(f, f->bob, 1, now - 30, 3600);
	int n = queue_load(f->db, now, it, 64);
	assert_int_equal(n, 64);
	bool bob = false;
	for (int i = 0; i < n; i++)
		bob |= it[i].user_id == f->bob;
	assert_true(bob);
	queue_order(it, (size_t)n);
	assert_int_equal(it[0].user_id, f->ann); /* same use (none): the earlier request */
	assert_int_equal(it[1].user_id, f->ann);
}

/* The kind each entry waits for is read back from the store (a restart keeps
 * each kind's queue), and GPU time is weighed as the ledger charges it: bob's
 * 4 h on a quarter share weighs 1 h, less than ann's 2 h on a whole card. */
static void test_load_reads_kinds_and_weighs_fractions(void **state)
{
	struct fixture *f = *state;
	struct runtime r;
	struct queue_item it[4];
	int64_t now = 10 * 86400;

	db_lock(f->db);
	assert_int_equal(db_exec(f->db,
				 "INSERT INTO ledger (user_id, user_name, kind, gpus, plan, start_at,"
				 " end_at, billable_s, last_heartbeat, fraction_milli) VALUES"
				 " (?, 'ann', 'gpu', '0', 'default', ?, ?, 7200, ?, 1000),"
				 " (?, 'bob', 'gpu', '131328', 'default', ?, ?, 14400, ?, 250)",
				 "iiiiiiii", f->ann, now - 3 * H, now - H, now - H, f->bob,
				 now - 5 * H, now - H, now - H),
			 2);
	assert_int_equal(db_exec(f->db,
				 "INSERT INTO jobs (user_id, name, status, secondary, spec, kind,"
				 " gpu_count, max_runtime_s, max_wait_s, grace_s, created_at, gpu_kind)"
				 " VALUES (?, 'mig', 'InProgress', 'Pending', '{}', 'gpu', 1, 60, 600,"
				 " 1, ?, '1g.18gb')",
				 "ii", f->ann, now - 5),
			 1);
	db_unlock(f->db);
	assert_int_equal(gpu_queue_add(f->db, f->ann, TOKEN, "whole", now - 20, H, now + 100, &r), 0);
	assert_int_equal(gpu_queue_add(f->db, f->bob, TOKEN, "share", now - 10, H, now + 100, &r), 0);
	assert_int_equal(queue_load(f->db, now, it, 4), 3);
	assert_string_equal(it[0].kind, "whole");
	assert_string_equal(it[1].kind, "share");
	assert_string_equal(it[2].kind, "1g.18gb");
	assert_int_equal(it[2].job_id > 0, 1);
	assert_int_equal(it[0].gpu_s_24h, 7200);
	assert_int_equal(it[1].gpu_s_24h, 14400 / 4);
	queue_order(it, 3);
	assert_int_equal(it[0].user_id, f->bob);
}

/* An entry opened this very second weighs a second, not nothing: the user
 * whose job just started goes behind one who waits with no use, so a pass
 * that starts several jobs does not give one user several in a row. */
static void test_load_weighs_a_start_of_this_second(void **state)
{
	struct fixture *f = *state;
	struct runtime r;
	struct queue_item it[4];
	int64_t now = 10 * 86400;

	db_lock(f->db);
	assert_int_equal(db_exec(f->db,
				 "INSERT INTO ledger (user_id, user_name, kind, plan, start_at,"
				 " last_heartbeat) VALUES (?, 'ann', 'gpu', 'default', ?, ?)",
				 "iii", f->ann, now, now),
			 1);
	db_unlock(f->db);
	assert_int_equal(gpu_queue_add(f->db, f->ann, TOKEN, "whole", now - 20, H, now + 100, &r), 0);
	assert_int_equal(gpu_queue_add(f->db, f->bob, TOKEN, "whole", now - 10, H, now + 100, &r), 0);
	assert_int_equal(queue_load(f->db, now, it, 4), 2);
	queue_order(it, 2);
	assert_int_equal(it[0].user_id, f->bob);
	assert_int_equal(it[1].gpu_s_24h, 1);
}

struct live_read {
	int64_t user[8];
	int n;
};

static int read_live(const struct job *j, void *ctx)
{
	struct live_read *l = ctx;

	l->user[l->n++] = j->user_id;
	return l->n == 8;
}

/* The jobs pass reads a bounded live set: ann's 600 waiting jobs, all
 * submitted before bob's, must not hide bob's head (it is read second, after
 * the job that holds a pool); and every overdue Pending job is found, however
 * deep in the queue. */
static void test_live_set_reads_users_in_turns(void **state)
{
	struct fixture *f = *state;
	struct live_read l = {.n = 0};
	int64_t ids[1000], now = 10 * 86400;

	add_waiting_jobs(f, f->ann, 600, now - 50, 100);
	add_waiting_jobs(f, f->bob, 2, now - 40, 100);
	db_lock(f->db);
	assert_int_equal(db_exec(f->db, "UPDATE jobs SET secondary = 'Training'"
					" WHERE id = 602", "", NULL), 1);
	db_unlock(f->db);
	assert_int_equal(jobs_each_live(f->db, read_live, &l), 0);
	assert_int_equal(l.n, 8);
	assert_int_equal(l.user[0], f->bob); /* the one holding a pool */
	assert_int_equal(l.user[1], f->ann); /* then the heads, in id order */
	assert_int_equal(l.user[2], f->bob);
	assert_int_equal(l.user[3], f->ann); /* then the second turns */
	assert_int_equal(l.user[4], f->ann);
	/* overdue at now + 1000: all 600 of ann's (created from now - 50, max_wait
	 * 100) and bob's one Pending */
	assert_int_equal(jobs_overdue_pending(f->db, now + 1000, ids, 1000), 601);
	assert_int_equal(jobs_overdue_pending(f->db, now + 1000, ids, 10), 10);
	assert_int_equal(jobs_overdue_pending(f->db, now, ids, 1000), 0);
}

/* A runtime's turn excuses the jobs whose users their own caps hold back,
 * as the jobs pass does: their pools at [jobs] max_pools_per_user, or the
 * GPUs they hold beside the job's beyond [quota] gpus_held. */
static void test_excused_are_the_users_their_caps_hold(void **state)
{
	struct fixture *f = *state;
	struct labd_config cfg = {.jobs_max_pools_per_user = 1, .quota_gpus_held = 2};
	struct pool_shape shape = {.user_id = f->ann, .gpu = true, .gpu_count = 1};
	struct queue_item it[] = {
		{.job_id = 1, .user_id = f->ann, .gpus = 1},
		{.runtime_id = 5, .user_id = f->bob, .gpus = 1},
		{.job_id = 2, .user_id = f->bob, .gpus = 1},
	};
	struct pool p;
	int64_t ex[4];

	assert_int_equal(queue_excused(f->db, &cfg, it, 3, ex, 4), 0);
	assert_int_equal(pools_create(f->db, &shape, "0", 0, 10, 1000, &p), 0);
	assert_int_equal(queue_excused(f->db, &cfg, it, 3, ex, 4), 1); /* its pool cap */
	assert_int_equal(ex[0], f->ann);
	cfg.jobs_max_pools_per_user = 4;
	assert_int_equal(queue_excused(f->db, &cfg, it, 3, ex, 4), 0); /* room for both */
	cfg.quota_gpus_held = 1;
	assert_int_equal(queue_excused(f->db, &cfg, it, 3, ex, 4), 1); /* its GPU cap */
	cfg.quota_gpus_held = 2;
	assert_int_equal(queue_excused(f->db, &cfg, it, 3, ex, 4), 0); /* room for both */
	assert_true(queue_excused(f->db, &cfg, it, 3, ex, 0) == 0);
}

static void exec_raw(sqlite3 *raw, const char *sql)
{
	char *err = NULL;
	if (sqlite3_exec(raw, sql, NULL, NULL, &err) != SQLITE_OK)
		fail_msg("%s: %s", sql, err ? err : "?");
}

/* Migration 9 rebuilds runtimes for the queued state: rows keep their ids,
 * the sequence keeps past ids (never reused, schema 8), and a second live
 * runtime of a user is still refused. */
static void test_migration_keeps_runtimes_and_their_sequence(void **state)
{
	struct fixture *f = *state;
	char path[160];
	struct db *db;
	struct runtime r;
	sqlite3 *raw;

	snprintf(path, sizeof(path), "%s/v8.db", f->dir);
	assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
	exec_raw(raw, "PRAGMA foreign_keys = ON");
	for (int v = 1; v <= 8; v++)
		exec_raw(raw, migrations_sql(v));
	exec_raw(raw, "PRAGMA user_version = 8");
	exec_raw(raw, "INSERT INTO users (id, name, role, password_hash, created_at, updated_at)"
		      " VALUES (4, 'cy', 'user', 'h', 1, 1)");
	exec_raw(raw, "INSERT INTO runtimes (id, user_id, kind, state, token, created_at, deadline,"
		      " last_activity) VALUES (3, 4, 'cpu', 'stopped', 't', 1, 2, 1),"
		      " (9, 4, 'gpu', 'running', 't', 1, 99, 1)");
	exec_raw(raw, "UPDATE sqlite_sequence SET seq = 12 WHERE name = 'runtimes'");
	sqlite3_close(raw);

	assert_int_equal(db_open(path, &db), 0);
	assert_int_equal(db_schema_version(db), migrations_count()); /* 9 and every later one */
	assert_int_equal(runtimes_live(db, 4, &r), 1);
	assert_int_equal(r.id, 9);
	assert_int_equal(r.state, RUNTIME_RUNNING);
	assert_int_equal(gpu_queue_add(db, 4, TOKEN, "whole", 5, H, 50, &r), DB_CONFLICT);
	assert_int_equal(runtimes_set_state(db, 9, RUNTIME_STOPPED, "done", 10), 1);
	assert_int_equal(gpu_queue_add(db, 4, TOKEN, "whole", 5, H, 50, &r), 0);
	assert_int_equal(r.id, 13); /* past the old sequence */
	db_close(db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_less_use_first_then_arrival),
		cmocka_unit_test(test_jobs_take_their_turn),
		cmocka_unit_test(test_a_runtime_never_overtakes_a_job_ahead),
		cmocka_unit_test(test_estimates_follow_the_holders_and_lengths),
		cmocka_unit_test(test_each_kind_waits_apart),
		cmocka_unit_test(test_places_and_estimates_per_kind),
		cmocka_unit_test_setup_teardown(test_load_reads_kinds_and_weighs_fractions, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rows_move_with_their_entry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_load_counts_open_entries_up_to_now, setup, teardown),
		cmocka_unit_test_setup_teardown(test_load_sees_every_users_head_job, setup, teardown),
		cmocka_unit_test_setup_teardown(test_load_reads_use_of_the_last_24h, setup, teardown),
		cmocka_unit_test_setup_teardown(test_load_weighs_a_start_of_this_second, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_live_set_reads_users_in_turns, setup, teardown),

		cmocka_unit_test_setup_teardown(test_load_weighs_each_gpu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_excused_are_the_users_their_caps_hold, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_migration_keeps_runtimes_and_their_sequence,
						setup, teardown),
	};
	return cmocka_run_group_tests_name("queue", tests, NULL, NULL);
}
