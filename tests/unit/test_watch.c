/* Unit tests: the runtime-change registry (runtime/watch.c) over a real
 * store: the first state at once, one call per change, caps, unsubscribe. */
#include "unit.h"

#include <errno.h>
#include <stdbool.h>

#include "runtime/watch.h"
#include "store/db.h"
#include "store/runtimes.h"
#include "store/users.h"

struct heard {
	int calls;
	bool none;
	enum runtime_state state;
};

static void on_change(void *ctx, const struct runtime *r)
{
	struct heard *h = ctx;
	h->calls++;
	h->none = !r;
	if (r)
		h->state = r->state;
}

static void test_watch_registry(void **state)
{
	char dir[64], path[128];
	struct db *db;
	struct user u, v;
	struct runtime r;
	struct runtime_watch *w;
	struct runtime_watcher *a, *b, *c, *extra;
	struct heard ha = {0}, hb = {0}, hc = {0};
	(void)state;

	unit_tempdir(dir);
	snprintf(path, sizeof(path), "%s/labd.db", dir);
	assert_int_equal(db_open(path, &db), 0);
	assert_int_equal(users_create(db, "alice", USER_ROLE_USER, "h", 1, &u), 0);
	assert_int_equal(users_create(db, "bob", USER_ROLE_USER, "h", 1, &v), 0);
	w = runtime_watch_new(db, 2, 3);
	assert_non_null(w);

	/* subscribing tells the current state at once: none yet */
	assert_int_equal(runtime_watch_subscribe(w, u.id, on_change, &ha, &a), 0);
	assert_int_equal(ha.calls, 1);
	assert_true(ha.none);
	assert_int_equal(runtime_watch_subscribe(w, u.id, on_change, &hb, &b), 0);
	/* per user, then in all */
	assert_int_equal(runtime_watch_subscribe(w, u.id, on_change, &hc, &extra), -EUSERS);
	assert_int_equal(runtime_watch_subscribe(w, v.id, on_change, &hc, &c), 0);
	assert_int_equal(runtime_watch_subscribe(w, v.id, on_change, &hc, &extra), -ENFILE);
	assert_int_equal(runtime_watch_count(w, u.id), 2);

	assert_int_equal(runtimes_create(db, u.id, RUNTIME_CPU, "t", "", 10, 1000, &r), 0);
	runtime_watch_notify(w, u.id);
	assert_int_equal(ha.calls, 2);
	assert_false(ha.none);
	assert_int_equal(ha.state, RUNTIME_STARTING);
	assert_int_equal(hb.calls, 2);
	assert_int_equal(hc.calls, 1); /* another user's runtime */
	/* no change, no event */
	runtime_watch_notify(w, u.id);
	assert_int_equal(ha.calls, 2);
	assert_int_equal(runtimes_set_state(db, r.id, RUNTIME_RUNNING, NULL, 11), 1);
	runtime_watch_notify(w, u.id);
	assert_int_equal(ha.state, RUNTIME_RUNNING);
	assert_int_equal(ha.calls, 3);

	/* unsubscribed: never called again; the slot is free again */
	runtime_watch_unsubscribe(w, b);
	assert_int_equal(runtimes_set_state(db, r.id, RUNTIME_STOPPING, "bye", 12), 1);
	runtime_watch_notify(w, u.id);
	assert_int_equal(ha.calls, 4);
	assert_int_equal(hb.calls, 3);
	assert_int_equal(runtime_watch_subscribe(w, u.id, on_change, &hb, &b), 0);
	assert_int_equal(hb.state, RUNTIME_STOPPING);
	runtime_watch_notify(NULL, u.id); /* no registry: nothing happens */

	runtime_watch_unsubscribe(w, a);
	runtime_watch_unsubscribe(w, b);
	runtime_watch_unsubscribe(w, NULL);
	runtime_watch_free(w); /* c is still subscribed: freed with the registry */
	db_close(db);
	unit_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_watch_registry),
	};
	return cmocka_run_group_tests_name("watch", tests, NULL, NULL);
}
