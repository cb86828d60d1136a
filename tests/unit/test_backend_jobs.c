/* Unit tests: the local backend's job-sandbox side (server/backend/local.c)
 * over a real SOCK_SEQPACKET socketpair: each request it sends passes the
 * supervisor's own field list, each reply code maps to its errno, and each
 * event reaches its callback with its values -- or is dropped when a field is
 * out of bounds or a phase/kind unknown. The supervisor's end is played by
 * this test with the same proto.c the supervisor uses. */
#include "unit.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#include "backend/backend.h"
#include "proto/proto.h"

struct seen {
	pthread_mutex_t lock;
	int ready, ended, phase, exited, sample;
	char last[64];
	int64_t pool_id, job_id, at_ms, number;
	bool flag;
};

static struct seen seen = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void ev_pool_ready(void *ctx, const char *user, int64_t pool_id)
{
	(void)ctx;
	pthread_mutex_lock(&seen.lock);
	seen.ready++;
	seen.pool_id = pool_id;
	snprintf(seen.last, sizeof(seen.last), "%s", user);
	pthread_mutex_unlock(&seen.lock);
}

static void ev_pool_ended(void *ctx, const char *user, int64_t pool_id, const char *cause,
			  bool failed, const char *reason)
{
	(void)ctx, (void)user, (void)reason;
	pthread_mutex_lock(&seen.lock);
	seen.ended++;
	seen.pool_id = pool_id;
	seen.flag = failed;
	snprintf(seen.last, sizeof(seen.last), "%s", cause);
	pthread_mutex_unlock(&seen.lock);
}

static void ev_job_phase(void *ctx, const char *user, int64_t pool_id, int64_t job_id,
			 const char *phase, int64_t at_ms)
{
	(void)ctx, (void)user, (void)pool_id;
	pthread_mutex_lock(&seen.lock);
	seen.phase++;
	seen.job_id = job_id;
	seen.at_ms = at_ms;
	snprintf(seen.last, sizeof(seen.last), "%s", phase);
	pthread_mutex_unlock(&seen.lock);
}

static void ev_job_exited(void *ctx, const char *user, int64_t pool_id, int64_t job_id,
			  const struct backend_job_exit *x)
{
	(void)ctx, (void)user, (void)pool_id;
	pthread_mutex_lock(&seen.lock);
	seen.exited++;
	seen.job_id = job_id;
	seen.number = x->signal;
	seen.flag = x->home_full;
	snprintf(seen.last, sizeof(seen.last), "%s:%s", x->kind, x->failure);
	pthread_mutex_unlock(&seen.lock);
}

static void ev_job_sample(void *ctx, const char *user, int64_t pool_id, int64_t job_id,
			  const struct backend_job_sample *s)
{
	(void)ctx, (void)user, (void)pool_id;
	pthread_mutex_lock(&seen.lock);
	seen.sample++;
	seen.job_id = job_id;
	seen.number = s->io_wait_us;
	seen.at_ms = s->log_bytes;
	pthread_mutex_unlock(&seen.lock);
}

/* The supervisor's end: answers each request with the reply the test queued
 * for its type after checking it against proto.h's list. */
struct peer {
	int fd;
	const char *type;      /* the request expected next */
	const struct proto_field *fields;
	json_t *reply_fields;  /* merged into the ok/error reply */
	bool ok;
	json_t *got;           /* the request as received */
};

static void *answer_hello(void *arg)
{
	int fd = *(int *)arg;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	json_t *m, *r;

	assert_int_equal(poll(&p, 1, 5000), 1);
	assert_int_equal(proto_recv(fd, &m), 0);
	r = proto_ok(proto_int(m, "id"));
	json_object_set_new(r, "version", json_string(LABD_VERSION));
	json_object_set_new(r, "warnings", json_array());
	assert_int_equal(proto_send(fd, r), 0);
	json_decref(r);
	json_decref(m);
	return NULL;
}

static void *serve_one(void *arg)
{
	struct peer *pe = arg;
	struct pollfd p = {.fd = pe->fd, .events = POLLIN};
	char err[128];
	json_t *m, *r;

	assert_int_equal(poll(&p, 1, 5000), 1);
	assert_int_equal(proto_recv(pe->fd, &m), 0);
	assert_string_equal(json_string_value(json_object_get(m, "type")), pe->type);
	if (proto_check(m, pe->fields, true, err, sizeof(err)) != 0)
		fail_msg("%s refused by the supervisor's list: %s", pe->type, err);
	r = pe->ok ? proto_ok(proto_int(m, "id")) : proto_msg("reply", proto_int(m, "id"));
	if (!pe->ok)
		json_object_set_new(r, "ok", json_false());
	json_object_update(r, pe->reply_fields);
	assert_int_equal(proto_send(pe->fd, r), 0);
	json_decref(r);
	pe->got = m;
	return NULL;
}

static const struct backend_events events = {
	.pool_ready = ev_pool_ready,
	.pool_ended = ev_pool_ended,
	.job_phase = ev_job_phase,
	.job_exited = ev_job_exited,
	.job_sample = ev_job_sample,
};

static struct backend *connect_backend(int sv[2])
{
	pthread_t t;
	struct backend *b;

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	pthread_create(&t, NULL, answer_hello, &sv[1]);
	b = backend_local_new(sv[0], &events);
	pthread_join(t, NULL);
	assert_non_null(b);
	return b;
}

/* Runs call() while the peer answers one request of type. */
#define SERVE(pe, call)                                                                        \
	({                                                                                     \
		pthread_t t_;                                                                  \
		pthread_create(&t_, NULL, serve_one, &(pe));                                   \
		int rc_ = (call);                                                              \
		pthread_join(t_, NULL);                                                        \
		rc_;                                                                           \
	})

static void test_requests(void **state)
{
	int sv[2];
	struct backend *b = connect_backend(sv);
	char err[200], hash[BACKEND_IMAGE_HASH_MAX];
	struct backend_pool_start s = {.user = "alice", .user_id = 3, .pool_id = 12,
				       .deadline_s = 2000000000,
				       .shape = {.memory_bytes = 1 << 30, .network = true,
						 .egress_bytes_per_s = 1000, .gpus = {1},
						 .n_gpus = 1, .image = "torch"},
				       .image_hash = hash};
	struct peer pe = {.fd = sv[1], .type = "pool_start", .fields = proto_pool_start, .ok = true,
			  .reply_fields = json_pack("{s:s}", "image_hash", "sha256:ab")};
	(void)state;

	assert_int_equal(SERVE(pe, backend_pool_start(b, &s, err, sizeof(err))), 0);
	assert_string_equal(hash, "sha256:ab");
	assert_int_equal(proto_int(pe.got, "pool_id"), 12);
	assert_int_equal(json_array_size(json_object_get(pe.got, "gpus")), 1);
	assert_string_equal(proto_str(pe.got, "image"), "torch");
	json_decref(pe.got);
	json_decref(pe.reply_fields);

	/* a held GPU is -EBUSY, as sandbox_start's */
	pe.ok = false;
	pe.reply_fields = json_pack("{s:s,s:s}", "code", "gpu_busy", "message", "held");
	assert_int_equal(SERVE(pe, backend_pool_start(b, &s, err, sizeof(err))), -EBUSY);
	json_decref(pe.got);
	json_decref(pe.reply_fields);

	pe = (struct peer){.fd = sv[1], .type = "job_run", .fields = proto_job_run,
			   .reply_fields = json_pack("{s:s,s:s}", "code", "bad_spec", "message",
						     "argv[0]: must not be empty")};
	assert_int_equal(SERVE(pe, backend_job_run(b, "alice", 12, 99, "{\"argv\":[\"\"]}", err,
						   sizeof(err))),
			 -EINVAL);
	assert_string_equal(err, "argv[0]: must not be empty");
	assert_string_equal(proto_str(pe.got, "spec"), "{\"argv\":[\"\"]}");
	json_decref(pe.got);
	json_decref(pe.reply_fields);
	pe.reply_fields = json_pack("{s:s,s:s}", "code", "pool_busy", "message", "a job runs");
	assert_int_equal(SERVE(pe, backend_job_run(b, "alice", 12, 99, "{}", err, sizeof(err))),
			 -EBUSY);
	json_decref(pe.got);
	json_decref(pe.reply_fields);

	/* grace beyond the protocol's bound is clamped, never sent out of bounds */
	pe = (struct peer){.fd = sv[1], .type = "job_stop", .fields = proto_job_stop, .ok = true,
			   .reply_fields = json_object()};
	assert_int_equal(SERVE(pe, backend_job_stop(b, "alice", 12, 99, 10LL * 86400)), 0);
	assert_int_equal(proto_int(pe.got, "grace_s"), PROTO_GRACE_MAX_S);
	json_decref(pe.got);

	pe.type = "pool_stop";
	pe.fields = proto_pool_stop;
	pe.ok = false;
	json_decref(pe.reply_fields);
	pe.reply_fields = json_pack("{s:s,s:s}", "code", "not_found", "message", "none");
	assert_int_equal(SERVE(pe, backend_pool_stop(b, "alice", 12, "released by the user")),
			 -ENOENT);
	assert_string_equal(proto_str(pe.got, "reason"), "released by the user");
	json_decref(pe.got);
	json_decref(pe.reply_fields);
	backend_free(b);
	close(sv[1]);
}

static void push(int fd, const char *text)
{
	assert_int_equal(send(fd, text, strlen(text), 0), (ssize_t)strlen(text));
}

/* Waits until counter reaches n (the reader thread delivers). */
static void wait_for(int *counter, int n)
{
	for (int i = 0; i < 500; i++) {
		pthread_mutex_lock(&seen.lock);
		int c = *counter;
		pthread_mutex_unlock(&seen.lock);
		if (c >= n)
			return;
		usleep(2000);
	}
	fail_msg("event not delivered");
}

static void test_events(void **state)
{
	int sv[2];
	struct backend *b = connect_backend(sv);
	(void)state;

	push(sv[1], "{\"v\":2,\"type\":\"pool_ready\",\"user\":\"alice\",\"pool_id\":12}");
	wait_for(&seen.ready, 1);
	assert_int_equal(seen.pool_id, 12);
	push(sv[1], "{\"v\":2,\"type\":\"job_phase\",\"user\":\"alice\",\"pool_id\":12,\"job_id\":9,"
		    "\"phase\":\"training\",\"at_ms\":1700000000123}");
	wait_for(&seen.phase, 1);
	assert_string_equal(seen.last, "training");
	assert_int_equal(seen.at_ms, 1700000000123LL);
	/* an unknown phase and an out-of-bounds sample are dropped */
	push(sv[1], "{\"v\":2,\"type\":\"job_phase\",\"user\":\"alice\",\"pool_id\":12,\"job_id\":9,"
		    "\"phase\":\"sleeping\",\"at_ms\":1}");
	push(sv[1], "{\"v\":2,\"type\":\"job_sample\",\"user\":\"alice\",\"pool_id\":12,\"job_id\":9,"
		    "\"at_ms\":1,\"cpu_usage_us\":-5,\"memory_bytes\":1,\"memory_limit_bytes\":0,"
		    "\"io_wait_us\":-1,\"log_bytes\":7}");
	push(sv[1], "{\"v\":2,\"type\":\"job_sample\",\"user\":\"alice\",\"pool_id\":12,\"job_id\":9,"
		    "\"at_ms\":1,\"cpu_usage_us\":5,\"memory_bytes\":1,\"memory_limit_bytes\":0,"
		    "\"io_wait_us\":-1,\"log_bytes\":7}");
	wait_for(&seen.sample, 1);
	assert_int_equal(seen.number, -1);
	assert_int_equal(seen.at_ms, 7);
	assert_int_equal(seen.phase, 1);
	push(sv[1], "{\"v\":2,\"type\":\"job_exited\",\"user\":\"alice\",\"pool_id\":12,\"job_id\":9,"
		    "\"kind\":\"melted\",\"code\":0,\"signal\":0,\"at_ms\":1,\"reason\":\"\","
		    "\"failure\":\"\",\"home_full\":false}");
	push(sv[1], "{\"v\":2,\"type\":\"job_exited\",\"user\":\"alice\",\"pool_id\":12,\"job_id\":9,"
		    "\"kind\":\"stopped\",\"code\":0,\"signal\":15,\"at_ms\":1,\"reason\":\"stop\","
		    "\"failure\":\"bad lr\",\"home_full\":true}");
	wait_for(&seen.exited, 1);
	assert_string_equal(seen.last, "stopped:bad lr");
	assert_int_equal(seen.number, 15);
	assert_true(seen.flag);
	push(sv[1], "{\"v\":2,\"type\":\"pool_ended\",\"user\":\"alice\",\"pool_id\":12,"
		    "\"cause\":\"gone\",\"failed\":true,\"reason\":\"lost\"}");
	wait_for(&seen.ended, 1);
	assert_string_equal(seen.last, "gone");
	assert_int_equal(seen.sample, 1);
	assert_int_equal(seen.exited, 1);
	backend_free(b);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_requests),
		cmocka_unit_test(test_events),
	};
	return cmocka_run_group_tests_name("backend_jobs", tests, NULL, NULL);
}
