/* Unit tests: the change registry (labd/watch.h) over a real store, as both
 * of its instances: runtimes keyed by user (runtime/watch.c) and jobs keyed
 * by job (jobs/watch.c). The first state at once, one call per change,
 * per-user and total caps, unsubscribe (also while a delivery runs), and
 * the capped set the log followers use. */
#include "unit.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "jobs/watch.h"
#include "labd/watch.h"
#include "runtime/watch.h"
#include "store/db.h"
#include "store/jobs.h"
#include "store/runtimes.h"
#include "store/users.h"

struct fixture {
	char dir[64];
	struct db *db;
	int64_t alice, bob;
};

static int64_t add_user(struct db *db, const char *name)
{
	struct user u;

	assert_int_equal(users_create(db, name, USER_ROLE_USER, "h", 1, &u), 0);
	return u.id;
}

/* A real store with two users, alice and bob. */
static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char path[128];

	assert_non_null(f);
	unit_tempdir(f->dir);
	snprintf(path, sizeof(path), "%s/labd.db", f->dir);
	assert_int_equal(db_open(path, &f->db), 0);
	f->alice = add_user(f->db, "alice");
	f->bob = add_user(f->db, "bob");
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

/* What a subscriber heard: calls, and of the last row its id and state. */
struct heard {
	int calls;
	bool none;
	int64_t id;
	int state;
};

static void on_runtime(void *ctx, const void *row)
{
	const struct runtime *r = row;
	struct heard *h = ctx;

	h->calls++;
	h->none = !r;
	h->id = r ? r->id : 0;
	h->state = r ? (int)r->state : -1;
}

static void on_job(void *ctx, const void *row)
{
	const struct job *j = row;
	struct heard *h = ctx;

	h->calls++;
	h->none = !j;
	h->id = j ? j->id : 0;
	h->state = j ? (int)j->secondary : -1;
}

static void test_runtime_key_user(void **state)
{
	struct fixture *f = *state;
	int64_t u = f->alice, v = f->bob;
	struct runtime r;
	struct watch *w = runtime_watch_new(f->db, 2, 3);
	struct watcher *a, *b, *c, *extra;
	struct heard ha = {0}, hb = {0}, hc = {0};

	assert_non_null(w);
	/* subscribing tells the current state at once: none yet */
	assert_int_equal(watch_subscribe(w, u, u, on_runtime, &ha, &a), 0);
	assert_int_equal(ha.calls, 1);
	assert_true(ha.none);
	assert_int_equal(watch_subscribe(w, u, u, on_runtime, &hb, &b), 0);
	/* per user, then in all */
	assert_int_equal(watch_subscribe(w, u, u, on_runtime, &hc, &extra), -EUSERS);
	assert_int_equal(watch_subscribe(w, v, v, on_runtime, &hc, &c), 0);
	assert_int_equal(watch_subscribe(w, v, v, on_runtime, &hc, &extra), -ENFILE);
	assert_int_equal(hc.calls, 1); /* a refused subscription hears nothing */
	assert_int_equal(watch_count(w, u), 2);

	assert_int_equal(runtimes_create(f->db, u, RUNTIME_CPU, "t", "", 10, 1000, &r), 0);
	runtime_watch_notify(w, u);
	assert_int_equal(ha.calls, 2);
	assert_false(ha.none);
	assert_int_equal(ha.state, RUNTIME_STARTING);
	assert_int_equal(hb.calls, 2);
	assert_int_equal(hc.calls, 1); /* another user's runtime */
	/* no change, no event */
	runtime_watch_notify(w, u);
	assert_int_equal(ha.calls, 2);
	assert_int_equal(runtimes_set_state(f->db, r.id, RUNTIME_RUNNING, NULL, 11), 1);
	runtime_watch_notify(w, u);
	assert_int_equal(ha.state, RUNTIME_RUNNING);
	assert_int_equal(ha.calls, 3);

	/* unsubscribed: never called again; the slot is free again */
	watch_unsubscribe(w, b);
	assert_int_equal(runtimes_set_state(f->db, r.id, RUNTIME_STOPPING, "bye", 12), 1);
	runtime_watch_notify(w, u);
	assert_int_equal(ha.calls, 4);
	assert_int_equal(hb.calls, 3);
	assert_int_equal(watch_subscribe(w, u, u, on_runtime, &hb, &b), 0);
	assert_int_equal(hb.state, RUNTIME_STOPPING);
	runtime_watch_notify(NULL, u); /* no registry: nothing happens */

	watch_unsubscribe(w, a);
	watch_unsubscribe(w, b);
	watch_unsubscribe(w, NULL);
	watch_free(w); /* c is still subscribed: freed with the registry */
}

static int64_t new_job(struct fixture *f, int64_t user_id, const char *name)
{
	struct job_new n = {.user_id = user_id, .name = name, .spec = "{\"command\":[\"sh\"]}",
			    .image = "", .max_runtime_s = 60, .max_wait_s = 60, .grace_s = 5,
			    .keep_alive_s = 30, .now_ms = 1000000, .max_live = -1};
	struct job j;
	int64_t id;

	assert_int_equal(jobs_create(f->db, &n, &j), 0);
	id = j.id;
	jobs_row_free(&j);
	return id;
}

static void test_job_key_job(void **state)
{
	struct fixture *f = *state;
	int64_t j1 = new_job(f, f->alice, "one"), j2 = new_job(f, f->alice, "two");
	struct watch *w = jobs_watch_new(f->db, 2, 3);
	struct watcher *a, *b, *c, *extra;
	struct heard ha = {0}, hb = {0}, hc = {0};
	struct job_move m = {.status = JOB_IN_PROGRESS, .secondary = JOB_STARTING,
			     .at_ms = 1001000, .message = "building"};

	assert_non_null(w);
	/* a job that does not exist is refused, and takes no slot */
	assert_int_equal(watch_subscribe(w, f->alice, 9999, on_job, &ha, &extra), -ENOENT);
	assert_int_equal(watch_count(w, f->alice), 0);
	/* the key is the job; the cap counts the subscribing user across jobs */
	assert_int_equal(watch_subscribe(w, f->alice, j1, on_job, &ha, &a), 0);
	assert_int_equal(ha.calls, 1);
	assert_int_equal(ha.id, j1);
	assert_int_equal(ha.state, JOB_PENDING);
	assert_int_equal(watch_subscribe(w, f->alice, j2, on_job, &hb, &b), 0);
	assert_int_equal(watch_subscribe(w, f->alice, j1, on_job, &hc, &extra), -EUSERS);
	/* bob (an administrator, say) watches alice's job: counted as his */
	assert_int_equal(watch_subscribe(w, f->bob, j1, on_job, &hc, &c), 0);
	assert_int_equal(watch_subscribe(w, f->bob, j2, on_job, &hc, &extra), -ENFILE);
	assert_int_equal(watch_count(w, f->bob), 1);

	/* a change of j1 reaches j1's subscribers only, once */
	assert_int_equal(jobs_move(f->db, j1, &m), 1);
	watch_notify(w, j1);
	watch_notify(w, j1);
	assert_int_equal(ha.calls, 2);
	assert_int_equal(ha.state, JOB_STARTING);
	assert_int_equal(hc.calls, 2);
	assert_int_equal(hb.calls, 1);
	/* what a reader sees move: the warm pool's status counts */
	assert_int_equal(jobs_set_warm(f->db, j1, "Available", 1, 0, 2, NULL, 0), 0);
	watch_notify(w, j1);
	assert_int_equal(ha.calls, 3);
	/* nobody follows 9999: nothing is read, nothing heard */
	watch_notify(w, 9999);
	assert_int_equal(ha.calls + hb.calls + hc.calls, 3 + 1 + 3);

	watch_unsubscribe(w, a);
	assert_int_equal(watch_subscribe(w, f->alice, j1, on_job, &ha, &a), 0);
	assert_int_equal(ha.calls, 4); /* a new subscription hears the row again */
	watch_free(w); /* a, b and c are freed with the registry */
}

/* A delivery that takes a while, on another thread. */
struct slow {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool inside, left;
	int calls;
};

static void on_slow(void *ctx, const void *row)
{
	struct slow *s = ctx;

	(void)row;
	pthread_mutex_lock(&s->lock);
	s->calls++;
	s->inside = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	usleep(100 * 1000);
	pthread_mutex_lock(&s->lock);
	s->left = true;
	pthread_mutex_unlock(&s->lock);
}

struct notify_arg {
	struct watch *w;
	int64_t key;
};

static void *notify_thread(void *arg)
{
	struct notify_arg *n = arg;

	watch_notify(n->w, n->key);
	return NULL;
}

static void test_unsubscribe_during_delivery(void **state)
{
	struct fixture *f = *state;
	int64_t j = new_job(f, f->alice, "slow");
	struct watch *w = jobs_watch_new(f->db, 4, 4);
	struct slow s = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
	struct job_move m = {.status = JOB_IN_PROGRESS, .secondary = JOB_STARTING, .at_ms = 1001000};
	struct notify_arg n = {w, j};
	struct watcher *sub;
	pthread_t t;

	assert_int_equal(watch_subscribe(w, f->alice, j, on_slow, &s, &sub), 0);
	assert_int_equal(s.calls, 1);
	s.inside = s.left = false;
	assert_int_equal(jobs_move(f->db, j, &m), 1);
	assert_int_equal(pthread_create(&t, NULL, notify_thread, &n), 0);
	pthread_mutex_lock(&s.lock);
	while (!s.inside)
		pthread_cond_wait(&s.cond, &s.lock);
	pthread_mutex_unlock(&s.lock);
	/* the callback is running: unsubscribing waits for it to return */
	watch_unsubscribe(w, sub);
	pthread_mutex_lock(&s.lock);
	assert_true(s.left);
	pthread_mutex_unlock(&s.lock);
	pthread_join(t, NULL);
	/* and it never runs again */
	m = (struct job_move){.status = JOB_IN_PROGRESS, .secondary = JOB_DOWNLOADING,
			      .at_ms = 1002000};
	assert_int_equal(jobs_move(f->db, j, &m), 1);
	watch_notify(w, j);
	assert_int_equal(s.calls, 2);
	assert_int_equal(watch_count(w, f->alice), 0);
	watch_free(w);
}

/* The capped set alone, as the job-log followers use it. */
struct item {
	int tag;
	struct watch_entry entry;
};

static void test_set_caps(void **state)
{
	struct watch_set set;
	struct item it[4] = {{.tag = 0}, {.tag = 1}, {.tag = 2}, {.tag = 3}};
	struct watch_entry *e;
	int seen = 0;

	(void)state;
	watch_set_init(&set, 2, 3);
	assert_int_equal(watch_set_add(&set, &it[0].entry, 1, 10), 0);
	assert_int_equal(watch_set_add(&set, &it[1].entry, 1, 11), 0);
	assert_int_equal(watch_set_add(&set, &it[2].entry, 1, 10), -EUSERS);
	assert_int_equal(watch_set_add(&set, &it[2].entry, 2, 10), 0);
	assert_int_equal(watch_set_add(&set, &it[3].entry, 3, 12), -ENFILE);
	assert_int_equal(set.n, 3);
	assert_int_equal(watch_set_count(&set, 1), 2);
	assert_true(watch_set_follows(&set, 11));
	assert_false(watch_set_follows(&set, 12));
	LIST_FOREACH(e, &set.entries, link)
		seen |= 1 << watch_entry_of(e, struct item, entry)->tag;
	assert_int_equal(seen, 7);
	watch_set_remove(&set, &it[1].entry);
	assert_false(watch_set_follows(&set, 11));
	assert_int_equal(watch_set_add(&set, &it[3].entry, 3, 12), 0);
	assert_int_equal(watch_set_count(&set, 1), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_runtime_key_user, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_key_job, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unsubscribe_during_delivery, setup, teardown),
		cmocka_unit_test(test_set_caps),
	};
	return cmocka_run_group_tests_name("watch", tests, NULL, NULL);
}
