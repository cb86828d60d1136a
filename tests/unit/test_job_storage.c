/* Unit tests of what jobs keep over a real SQLite file (store/job_storage.c
 * and its use by store/jobs.c): the storage row made with a job and the
 * job_storage_bytes refusal at create, the sums per user, the open rows,
 * the points' estimate, which ended jobs retention picks (by age and by
 * count per user) and the deletion of an ended job with all its rows. */
#include "unit.h"

#include <string.h>

#include "store/db.h"
#include "store/job_observe.h"
#include "store/job_storage.h"
#include "store/jobs.h"
#include "store/users.h"

#define SPEC "{\"command\":[\"sh\"]}"
#define SPEC_BYTES ((int64_t)sizeof(SPEC) - 1)

#include "store_fixture.h"

/* A new job of user_id; its id, or the create's refusal (< 0). */
static int64_t create(struct fixture *f, int64_t user_id, const char *name, int64_t max_stored)
{
	struct job_new n = {.user_id = user_id, .name = name, .spec = SPEC, .image = "",
			    .max_runtime_s = 60, .max_wait_s = 60, .grace_s = 5, .now_ms = 1000000,
			    .max_live = -1, .max_stored_bytes = max_stored};
	struct job j;
	int rc = jobs_create(f->db, &n, &j);

	if (rc < 0)
		return rc;
	jobs_row_free(&j);
	return j.id;
}

/* Ends job id Completed at at_s. */
static void end(struct fixture *f, int64_t id, int64_t at_s)
{
	struct job_move m = {.secondary = JOB_S_COMPLETED, .status = JOB_COMPLETED,
			     .message = "", .at_ms = at_s * 1000};
	assert_int_equal(jobs_move(f->db, id, &m), 1);
}

static void test_create_charges_the_spec_and_refuses_past_the_limit(void **state)
{
	struct fixture *f = *state;
	struct job_storage_use use;

	assert_true(create(f, f->ann, "a", 2 * SPEC_BYTES) > 0);
	assert_true(create(f, f->ann, "b", 2 * SPEC_BYTES) > 0); /* exactly at it */
	assert_int_equal(create(f, f->ann, "c", 2 * SPEC_BYTES), JOBS_CREATE_STORAGE);
	assert_true(create(f, f->ann, "c", 0) > 0); /* 0: no limit */
	assert_true(create(f, f->bob, "a", 2 * SPEC_BYTES) > 0); /* bob's own bytes */
	assert_int_equal(job_storage_of_user(f->db, f->ann, &use), 0);
	assert_int_equal(use.jobs, 3);
	assert_int_equal(use.spec_bytes, 3 * SPEC_BYTES);
	assert_int_equal(use.total_bytes, 3 * SPEC_BYTES);
}

static int count_open(const struct job_storage_open *o, void *ctx)
{
	(void)o;
	++*(int *)ctx;
	return 0;
}

static void test_measurements_sum_and_final_rows_are_left_alone(void **state)
{
	struct fixture *f = *state;
	struct job_storage_use use;
	int64_t a = create(f, f->ann, "a", 0), b = create(f, f->ann, "b", 0);
	int n = 0;

	assert_int_equal(job_storage_set(f->db, a, 1000, 50, true), 0);
	assert_int_equal(job_storage_set(f->db, b, 24, 0, false), 0);
	assert_int_equal(job_storage_of_user(f->db, f->ann, &use), 0);
	assert_int_equal(use.log_bytes, 1024);
	assert_int_equal(use.metric_bytes, 50);
	assert_int_equal(use.total_bytes, 2 * SPEC_BYTES + 1074);
	assert_int_equal(job_storage_each_open(f->db, f->ann, 100, count_open, &n), 1);
	assert_int_equal(job_storage_each_open(f->db, f->bob, 100, count_open, &n), 0);
	assert_int_equal(n, 1);
}

static void test_points_are_estimated_from_count_and_names(void **state)
{
	struct fixture *f = *state;
	int64_t a = create(f, f->ann, "a", 0);

	assert_int_equal(job_storage_metric_estimate(0, 0), 0);
	assert_int_equal(job_storage_metric_estimate(10, 40), 10 * 48 + 90);
	for (int i = 0; i < 10; i++)
		assert_int_equal(job_metrics_add(f->db, a, "loss", 1000 + i, i), 0);
	assert_int_equal(job_metrics_add(f->db, a, "accuracy", 2000, 1), 0);
	assert_int_equal(job_storage_metric_bytes(f->db, a), job_storage_metric_estimate(11, 48));
}

static int collect(int64_t job_id, void *ctx)
{
	int64_t *ids = ctx;
	ids[++ids[0]] = job_id;
	return 0;
}

static void test_retention_picks_by_age_and_by_count_per_user(void **state)
{
	struct fixture *f = *state;
	int64_t a[4] = {0}, b = create(f, f->bob, "b", 0), live = create(f, f->ann, "live", 0);
	int64_t ids[8] = {0};

	(void)live;
	for (int i = 0; i < 4; i++) {
		char name[8];
		snprintf(name, sizeof(name), "a%d", i);
		a[i] = create(f, f->ann, name, 0);
		end(f, a[i], 100 + i);
	}
	end(f, b, 50); /* bob's, oldest of all */
	/* by age: ended before 102 */
	assert_int_equal(job_storage_each_expired(f->db, 102, -1, 0, 10, collect, ids), 3);
	assert_true(ids[1] == b && ids[2] == a[0] && ids[3] == a[1]);
	/* by count: ann keeps her newest 2 ended; bob his one; the live job is not counted */
	memset(ids, 0, sizeof(ids));
	assert_int_equal(job_storage_each_expired(f->db, 0, 2, 0, 10, collect, ids), 2);
	assert_true((ids[1] == a[0] && ids[2] == a[1]) || (ids[1] == a[1] && ids[2] == a[0]));
	/* both: by age first (bob's and a0), then ann's beyond her newest 2 of the rest */
	memset(ids, 0, sizeof(ids));
	assert_int_equal(job_storage_each_expired(f->db, 101, 2, 0, 10, collect, ids), 3);
	assert_true(ids[1] == b && ids[2] == a[0] && ids[3] == a[1]);
	memset(ids, 0, sizeof(ids));
	assert_int_equal(job_storage_each_expired(f->db, 0, 4, 0, 10, collect, ids), 0);
	/* the cap looks at users with an end since ended_since only */
	memset(ids, 0, sizeof(ids));
	assert_int_equal(job_storage_each_expired(f->db, 0, 2, 104, 10, collect, ids), 0);
	assert_int_equal(job_storage_each_expired(f->db, 0, 2, 103, 10, collect, ids), 2);
	/* bounded */
	memset(ids, 0, sizeof(ids));
	assert_int_equal(job_storage_each_expired(f->db, 1000, 2, 0, 1, collect, ids), 1);
	assert_int_equal(ids[1], b);
}

/* The job's transitions, metric points and storage row together. */
static int64_t count_rows(struct fixture *f, int64_t id)
{
	int n = -1;
	assert_int_equal(db_one(f->db, "SELECT (SELECT count(*) FROM job_transitions WHERE job_id = ?)"
				       " + (SELECT count(*) FROM job_metrics WHERE job_id = ?)"
				       " + (SELECT count(*) FROM job_storage WHERE job_id = ?)",
				"iii", db_row_int, &n, id, id, id),
			 1);
	return n;
}

static void test_delete_refuses_a_live_job_and_takes_all_rows_of_an_ended_one(void **state)
{
	struct fixture *f = *state;
	int64_t a = create(f, f->ann, "a", 0);

	assert_int_equal(job_metrics_add(f->db, a, "loss", 1000, 1), 0);
	assert_int_equal(job_storage_delete_job(f->db, a), JOB_STORAGE_LIVE);
	assert_int_equal(job_storage_job_exists(f->db, a), 1);
	end(f, a, 100);
	assert_true(count_rows(f, a) >= 4); /* two transitions, a point, storage */
	assert_int_equal(job_storage_delete_job(f->db, a), 1);
	assert_int_equal(job_storage_job_exists(f->db, a), 0);
	assert_int_equal(count_rows(f, a), 0);
	assert_int_equal(job_storage_delete_job(f->db, a), 0);
	/* the name is free again; the id never comes back */
	assert_true(create(f, f->ann, "a", 0) > a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_create_charges_the_spec_and_refuses_past_the_limit,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_measurements_sum_and_final_rows_are_left_alone,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_points_are_estimated_from_count_and_names, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_retention_picks_by_age_and_by_count_per_user,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_delete_refuses_a_live_job_and_takes_all_rows_of_an_ended_one, setup,
			teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
