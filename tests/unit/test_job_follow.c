/* Unit tests: the log followers' thread (jobs/follow.c) over a real log
 * file and store, with sinks that are plain buffers - a sink with little
 * room gets the log in pieces as its room allows, nothing lost or
 * repeated; a finished job's followers get "end" after the last byte. */
#include "unit.h"

#include <pthread.h>
#include <errno.h>
#include <sys/stat.h>
#include <time.h>

#include "config/config.h"
#include "jobs/follow.h"
#include "jobs/joblog.h"
#include "labd/buf.h"
#include "store/db.h"

struct sink_state {
	pthread_mutex_t lock;
	size_t room;       /* what the sink says it can take */
	struct buf text;   /* every log event's data, lines joined by \n */
	uint64_t last_id;
	int events, ends;
	bool ended;
	/* set by the hub's thread, asserted on the test's (cmocka's asserts
	 * belong to the main thread) */
	bool id_not_growing, event_too_big;
};

static size_t room(void *ctx)
{
	struct sink_state *s = ctx;
	size_t r;

	pthread_mutex_lock(&s->lock);
	r = s->room;
	pthread_mutex_unlock(&s->lock);
	return r;
}

static int event(void *ctx, const char *name, const char *data, uint64_t id)
{
	struct sink_state *s = ctx;

	pthread_mutex_lock(&s->lock);
	if (!strcmp(name, "log")) {
		s->id_not_growing |= id <= s->last_id;
		/* a log event never costs more than its framing budget */
		s->event_too_big |= strlen(data) > JOBLOG_EVENT_MAX_BYTES;
		if (s->text.len)
			buf_add(&s->text, "\n", 1);
		buf_add(&s->text, data, strlen(data));
		s->last_id = id;
		s->events++;
	} else if (!strcmp(name, "end")) {
		s->ends++;
	}
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static void end(void *ctx)
{
	struct sink_state *s = ctx;

	pthread_mutex_lock(&s->lock);
	s->ended = true;
	pthread_mutex_unlock(&s->lock);
}

static const struct follow_sink sink = {room, event, end};

struct fixture {
	char dir[64];
	struct labd_config cfg;
	struct db *db;
	int64_t job_id;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char path[160];

	assert_non_null(f);
	unit_tempdir(f->dir);
	config_defaults(&f->cfg, false);
	snprintf(f->cfg.state_dir, sizeof(f->cfg.state_dir), "%s", f->dir);
	snprintf(path, sizeof(path), "%s/joblogs", f->dir);
	assert_int_equal(mkdir(path, 0750), 0);
	snprintf(path, sizeof(path), "%s/labd.db", f->dir);
	assert_int_equal(db_open(path, &f->db), 0);
	db_lock(f->db);
	assert_true(db_exec(f->db,
			    "INSERT INTO users (name, role, password_hash, created_at, updated_at)"
			    " VALUES ('u', 'user', 'x', 0, 0)",
			    "") == 1);
	assert_true(db_exec(f->db,
			    "INSERT INTO jobs (user_id, name, status, secondary, spec, kind,"
			    " max_runtime_s, max_wait_s, grace_s, created_at) VALUES (1, 'j',"
			    " 'InProgress', 'Training', '{}', 'cpu', 60, 60, 1, 0)",
			    "") == 1);
	f->job_id = db_last_id(f->db);
	db_unlock(f->db);
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

static void append(struct fixture *f, const char *text, size_t len)
{
	char path[4096];
	FILE *fh;

	assert_int_equal(jobs_log_path(&f->cfg, f->job_id, path, sizeof(path)), 0);
	assert_non_null(fh = fopen(path, "a"));
	assert_int_equal(fwrite(text, 1, len, fh), len);
	fclose(fh);
}

static void set_room(struct sink_state *s, size_t room_bytes)
{
	pthread_mutex_lock(&s->lock);
	s->room = room_bytes;
	pthread_mutex_unlock(&s->lock);
}

/* Waits up to 10 s for pred(s). */
static bool wait_for(struct sink_state *s, bool (*pred)(struct sink_state *s, void *arg),
		     void *arg)
{
	for (int i = 0; i < 1000; i++) {
		bool ok;
		pthread_mutex_lock(&s->lock);
		ok = pred(s, arg);
		pthread_mutex_unlock(&s->lock);
		if (ok)
			return true;
		usleep(10000);
	}
	return false;
}

static bool has_id(struct sink_state *s, void *arg)
{
	return s->last_id >= *(uint64_t *)arg;
}

static bool has_ended(struct sink_state *s, void *arg)
{
	(void)arg;
	return s->ended;
}

static void test_room_paces_a_follower_without_loss(void **state)
{
	struct fixture *f = *state;
	struct follow_hub *h = follow_new(&f->cfg, f->db, 8, 8);
	struct sink_state s = {.lock = PTHREAD_MUTEX_INITIALIZER, .room = 0};
	struct follower *fl;
	struct buf want;
	uint64_t total;

	buf_init(&s.text, 8 << 20);
	buf_init(&want, 8 << 20);
	for (int i = 0; i < 30000; i++)
		buf_addf(&want, "%s%05d %s", i ? "\n" : "", i, "some training output");
	append(f, want.data, want.len);
	append(f, "\n", 1);
	total = want.len + 1;
	assert_non_null(h);
	assert_int_equal(follow_add(h, 1, f->job_id, 0, &sink, &s, &fl), 0);
	/* no room: nothing comes */
	usleep(3 * FOLLOW_PERIOD_MS * 1000);
	assert_int_equal(s.events, 0);
	/* room for about one event at a time: it comes in pieces */
	set_room(&s, JOBLOG_EVENT_MAX_BYTES + 256);
	uint64_t some = 100000;
	assert_true(wait_for(&s, has_id, &some));
	set_room(&s, 1 << 30);
	assert_true(wait_for(&s, has_id, &total));
	assert_true(s.events > 20);
	assert_int_equal(s.text.len, want.len);
	assert_memory_equal(s.text.data, want.data, want.len);
	assert_int_equal(s.ends, 0); /* the job is live */
	/* the job ends: the last line without newline, then end, once */
	append(f, "tail", 4);
	follow_job_ended(h, f->job_id);
	assert_true(wait_for(&s, has_ended, NULL));
	assert_int_equal(s.ends, 1);
	assert_int_equal(s.last_id, total + 4);
	assert_false(s.id_not_growing);
	assert_false(s.event_too_big);
	assert_string_equal(s.text.data + s.text.len - 5, "\ntail");
	follow_remove(h, fl);
	assert_int_equal(follow_count(h), 0);
	follow_free(h);
	buf_release(&s.text);
	buf_release(&want);
}

static void test_caps(void **state)
{
	struct fixture *f = *state;
	struct follow_hub *h = follow_new(&f->cfg, f->db, 3, 2);
	struct sink_state s = {.lock = PTHREAD_MUTEX_INITIALIZER};
	struct follower *a, *b, *c, *d;

	buf_init(&s.text, 1 << 20);
	assert_int_equal(follow_add(h, 1, f->job_id, 0, &sink, &s, &a), 0);
	assert_int_equal(follow_add(h, 1, f->job_id, 0, &sink, &s, &b), 0);
	assert_int_equal(follow_add(h, 1, f->job_id, 0, &sink, &s, &c), -EUSERS);
	assert_int_equal(follow_add(h, 2, f->job_id, 0, &sink, &s, &c), 0);
	assert_int_equal(follow_add(h, 3, f->job_id, 0, &sink, &s, &d), -ENFILE);
	assert_int_equal(follow_count_user(h, 1), 2);
	follow_remove(h, a);
	assert_int_equal(follow_add(h, 1, f->job_id, 0, &sink, &s, &a), 0);
	follow_free(h); /* frees the followers left */
	buf_release(&s.text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_room_paces_a_follower_without_loss, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_caps, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
