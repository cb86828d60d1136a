/* Unit tests: the supervisor protocol's framing, its field checks, and the
 * supervisor's message table (permits per channel state, unknown types, bad
 * fields), all over a real SOCK_SEQPACKET socketpair. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include "proto/proto.h"
#include "supervisor/channel.h"

static void test_roundtrip(void **state)
{
	int sv[2];
	json_t *msg = proto_msg("ping", 7), *got;
	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(proto_send(sv[0], msg), 0);
	assert_int_equal(proto_recv(sv[1], &got), 0);
	assert_true(json_equal(msg, got));
	json_decref(got);
	json_decref(msg);
	assert_int_equal(proto_recv(sv[1], &got), -EAGAIN); /* nothing more */
	close(sv[0]);
	assert_int_equal(proto_recv(sv[1], &got), 1); /* EOF */
	close(sv[1]);
}

/* A descriptor beside a message (job_shell's reply: a pty's master) arrives with it,
 * close-on-exec; a message without one says -1; one beside a message that is no
 * JSON object is closed, never handed on. */
static void test_descriptor_beside_a_message(void **state)
{
	int sv[2], p[2], fd = -2;
	json_t *msg = proto_ok(9), *got;
	char c = 0;
	(void)state;

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(proto_send_fd(sv[0], msg, p[1]), 0);
	assert_int_equal(proto_recv_fd(sv[1], &got, &fd), 0);
	assert_true(json_equal(msg, got));
	assert_true(fd >= 0 && fd != p[1]);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(write(fd, "x", 1), 1); /* the same pipe */
	assert_int_equal(read(p[0], &c, 1), 1);
	assert_int_equal(c, 'x');
	close(fd);
	json_decref(got);
	/* none beside it */
	assert_int_equal(proto_send(sv[0], msg), 0);
	assert_int_equal(proto_recv_fd(sv[1], &got, &fd), 0);
	assert_int_equal(fd, -1);
	json_decref(got);
	/* beside garbage: refused, and the copy closed (the pipe's last writer goes) */
	assert_int_equal(send(sv[0], "[1]", 3, 0), 3);
	assert_int_equal(proto_recv_fd(sv[1], &got, &fd), -EPROTO);
	assert_int_equal(fd, -1);
	json_decref(msg);
	msg = json_pack("{s:i}", "v", 2);
	assert_int_equal(proto_send_fd(sv[0], msg, p[1]), 0);
	close(p[1]);
	assert_int_equal(proto_recv(sv[1], &got), 0); /* proto_recv drops what came beside */
	json_decref(got);
	assert_int_equal(read(p[0], &c, 1), 0); /* no writer is left anywhere */
	json_decref(msg);
	close(p[0]);
	close(sv[0]);
	close(sv[1]);
}

/* job_shell's fields: the job's key and a terminal size of 1..1000 */
static void test_job_shell_fields(void **state)
{
	char err[128];
	json_t *m = json_pack("{s:i,s:s,s:i,s:s,s:i,s:i,s:i,s:i}", "v", 2, "type", "job_shell", "id", 3,
			      "user", "alice", "pool_id", 4, "job_id", 5, "cols", 80, "rows", 24);
	(void)state;

	assert_int_equal(proto_check(m, proto_job_shell, true, err, sizeof(err)), 0);
	json_object_set_new(m, "cols", json_integer(PROTO_SHELL_SIZE_MAX + 1));
	assert_int_equal(proto_check(m, proto_job_shell, true, err, sizeof(err)), -EPROTO);
	json_object_set_new(m, "cols", json_integer(0));
	assert_int_equal(proto_check(m, proto_job_shell, true, err, sizeof(err)), -EPROTO);
	json_object_set_new(m, "cols", json_integer(80));
	json_object_set_new(m, "argv", json_string("sh"));
	assert_int_equal(proto_check(m, proto_job_shell, true, err, sizeof(err)), -EPROTO);
	json_decref(m);
}

static void test_rejects_garbage_and_oversize(void **state)
{
	int sv[2];
	json_t *got;
	char *big = malloc(PROTO_MAX_MESSAGE + 100);
	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(send(sv[0], "not json", 8, 0), 8);
	assert_int_equal(proto_recv(sv[1], &got), -EPROTO);
	assert_int_equal(send(sv[0], "[1]", 3, 0), 3);
	assert_int_equal(proto_recv(sv[1], &got), -EPROTO);
	memset(big, ' ', PROTO_MAX_MESSAGE + 100);
	big[0] = '{';
	big[PROTO_MAX_MESSAGE + 99] = '}';
	assert_int_equal(send(sv[0], big, PROTO_MAX_MESSAGE + 100, 0), PROTO_MAX_MESSAGE + 100);
	assert_int_equal(proto_recv(sv[1], &got), -EPROTO);
	assert_null(got);
	free(big);
	close(sv[0]);
	close(sv[1]);
}

static int check(const char *text, const struct proto_field *fields, bool want_id)
{
	char err[128];
	json_t *msg = json_loads(text, 0, NULL);
	assert_non_null(msg);
	int rc = proto_check(msg, fields, want_id, err, sizeof(err));
	json_decref(msg);
	return rc;
}

static void test_field_checks(void **state)
{
	const char *tok = "abcdefghijklmnopqrstuvwxyz0123456789-_ABCDE";
	char ok[512], bad[512];
	(void)state;
	assert_int_equal(check("{\"v\":2,\"id\":3,\"type\":\"ping\"}", proto_empty, true), 0);
	assert_int_equal(check("{\"v\":1,\"id\":3,\"type\":\"ping\"}", proto_empty, true), -EPROTO);
	assert_int_equal(check("{\"id\":3,\"type\":\"ping\"}", proto_empty, true), -EPROTO);
	assert_int_equal(check("{\"v\":2,\"id\":-1,\"type\":\"ping\"}", proto_empty, true), -EPROTO);
	assert_int_equal(check("{\"v\":2,\"type\":\"ping\"}", proto_empty, true), -EPROTO);
	assert_int_equal(check("{\"v\":2,\"id\":1,\"type\":\"x\"}", proto_empty, false), -EPROTO);
	assert_int_equal(check("{\"v\":2,\"id\":3,\"type\":\"ping\",\"x\":1}", proto_empty, true),
			 -EPROTO);
	snprintf(ok, sizeof(ok),
		 "{\"v\":2,\"id\":5,\"type\":\"sandbox_start\",\"user\":\"alice\",\"user_id\":2,"
		 "\"runtime_id\":9,\"kind\":\"cpu\",\"token\":\"%s\",\"deadline\":2000000000,"
		 "\"gpus\":[]}",
		 tok);
	assert_int_equal(check(ok, proto_sandbox_start, true), 0);
	/* each bound: name syntax, uid range, token charset and length, gpus */
	const char *const mutations[][2] = {
		{"\"alice\"", "\"Alice\""},		{"\"alice\"", "\"_alice\""},
		{"\"user_id\":2", "\"user_id\":0"},	{"\"user_id\":2", "\"user_id\":1000001"},
		{"\"gpus\":[]", "\"gpus\":[-1]"},	{"\"gpus\":[]", "\"gpus\":[\"0\"]"},
		{"\"kind\":\"cpu\"", "\"kind\":\"cpux\""}, {"CDE\"", "CD/\""},
		{"CDE\"", "CD\""},
		{"\"deadline\":2000000000", "\"deadline\":\"soon\""},
	};
	for (size_t i = 0; i < sizeof(mutations) / sizeof(mutations[0]); i++) {
		const char *at = strstr(ok, mutations[i][0]);
		assert_non_null(at);
		snprintf(bad, sizeof(bad), "%.*s%s%s", (int)(at - ok), ok, mutations[i][1],
			 at + strlen(mutations[i][0]));
		assert_int_equal(check(bad, proto_sandbox_start, true), -EPROTO);
	}
	assert_int_equal(check("{\"v\":2,\"id\":5,\"type\":\"sandbox_stop\",\"user\":\"a\","
			       "\"runtime_id\":0,\"reason\":\"x\"}",
			       proto_sandbox_stop, true),
			 0);
	assert_int_equal(check("{\"v\":2,\"id\":5,\"type\":\"sandbox_stop\",\"user\":\"a\","
			       "\"reason\":\"x\"}",
			       proto_sandbox_stop, true),
			 -EPROTO);
}

/* Applies each mutation to ok and expects proto_check to refuse it. */
static void refuse_each(const char *ok, const char *const (*m)[2], size_t n,
			const struct proto_field *fields, bool want_id)
{
	char bad[2048];

	assert_int_equal(check(ok, fields, want_id), 0);
	for (size_t i = 0; i < n; i++) {
		const char *at = strstr(ok, m[i][0]);
		assert_non_null(at);
		snprintf(bad, sizeof(bad), "%.*s%s%s", (int)(at - ok), ok, m[i][1],
			 at + strlen(m[i][0]));
		if (check(bad, fields, want_id) != -EPROTO)
			fail_msg("accepted %s", bad);
	}
}

/* The job-sandbox requests: kinds and bounds of every field (contract §1). */
static void test_pool_job_requests(void **state)
{
	(void)state;
	const char *start = "{\"v\":2,\"id\":1,\"type\":\"pool_start\",\"user\":\"alice\",\"user_id\":2,"
			    "\"pool_id\":7,\"deadline\":2000000000,\"gpus\":[0],\"memory_bytes\":1024,"
			    "\"cpus_milli\":500,\"home_size_bytes\":4096,\"network\":1,"
			    "\"egress_bytes_per_s\":10,\"image\":\"torch\"}";
	const char *const ms[][2] = {
		{"\"pool_id\":7", "\"pool_id\":0"},	   {"\"user_id\":2", "\"user_id\":0"},
		{"\"network\":1", "\"network\":2"},	   {"\"image\":\"torch\"", "\"image\":\"\""},
		{"\"gpus\":[0]", "\"gpus\":[-1]"},	   {"\"deadline\":2000000000", "\"deadline\":0"},
		{"\"cpus_milli\":500", "\"cpus_milli\":0"}, {"\"alice\"", "\"../x\""},
		{"\"image\"", "\"kind\""},
	};
	refuse_each(start, ms, sizeof(ms) / sizeof(ms[0]), proto_pool_start, true);
	assert_int_equal(check("{\"v\":2,\"id\":1,\"type\":\"pool_start\",\"user\":\"a\",\"user_id\":2,"
			       "\"pool_id\":7,\"deadline\":2000000000,\"gpus\":[]}",
			       proto_pool_start, true),
			 0);

	/* a host of a job on several nodes: its peer address, its peers, a scratch home */
	const char *peer = "{\"v\":2,\"id\":1,\"type\":\"pool_start\",\"user\":\"a\",\"user_id\":2,"
			   "\"pool_id\":7,\"deadline\":2000000000,\"gpus\":[],"
			   "\"peer_addr\":\"10.1.0.193\",\"peers\":\"10.1.0.194,10.1.0.195\","
			   "\"scratch_home\":true}";
	const char *const ps[][2] = {
		{"\"10.1.0.193\"", "\"1.2.3\""},		  /* shorter than 7 */
		{"\"10.1.0.193\"", "\"100.100.100.1000\""}, /* longer than 15 */
		{"\"10.1.0.194,10.1.0.195\"", "\"\""},	  /* empty */
		{"\"10.1.0.194,10.1.0.195\"", "[\"10.1.0.194\"]"},
		{"true}", "\"yes\"}"},
		{"\"scratch_home\"", "\"scratch\""},
	};
	refuse_each(peer, ps, sizeof(ps) / sizeof(ps[0]), proto_pool_start, true);

	const char *stop = "{\"v\":2,\"id\":1,\"type\":\"pool_stop\",\"user\":\"a\",\"pool_id\":3,"
			   "\"reason\":\"released\"}";
	const char *const ss[][2] = {{"\"pool_id\":3", "\"pool_id\":-3"}, {",\"reason\":\"released\"", ""}};
	refuse_each(stop, ss, 2, proto_pool_stop, true);

	const char *run = "{\"v\":2,\"id\":1,\"type\":\"job_run\",\"user\":\"a\",\"pool_id\":3,"
			  "\"job_id\":9,\"spec\":\"{}\"}";
	const char *const rs[][2] = {{"\"job_id\":9", "\"job_id\":0"},
				     {"\"spec\":\"{}\"", "\"spec\":{}"},
				     {"\"spec\":\"{}\"", "\"spec\":\"\""}};
	refuse_each(run, rs, 3, proto_job_run, true);

	const char *js = "{\"v\":2,\"id\":1,\"type\":\"job_stop\",\"user\":\"a\",\"pool_id\":3,"
			 "\"job_id\":9,\"grace_s\":120}";
	const char *const jss[][2] = {{"\"grace_s\":120", "\"grace_s\":86401"},
				      {"\"grace_s\":120", "\"grace_s\":-1"},
				      {",\"grace_s\":120", ""}};
	refuse_each(js, jss, 3, proto_job_stop, true);

	/* the logs of gone jobs: 1 to PROTO_JOB_LOGS_MAX ids, each >= 0 */
	const char *lr = "{\"v\":2,\"id\":1,\"type\":\"job_logs_remove\",\"job_ids\":[4,9]}";
	const char *const lrs[][2] = {{"[4,9]", "[]"}, {"[4,9]", "[4,-9]"}, {"[4,9]", "[\"4\"]"},
				      {"[4,9]", "4"}};
	refuse_each(lr, lrs, 4, proto_job_logs_remove, true);
	char many[4096];
	size_t used = (size_t)snprintf(many, sizeof(many),
				       "{\"v\":2,\"id\":1,\"type\":\"job_logs_remove\",\"job_ids\":[");
	for (int i = 0; i <= PROTO_JOB_LOGS_MAX; i++)
		used += (size_t)snprintf(many + used, sizeof(many) - used, "%s%d", i ? "," : "", i);
	snprintf(many + used, sizeof(many) - used, "]}");
	assert_int_not_equal(check(many, proto_job_logs_remove, true), 0);
}

/* The job-sandbox events: what labd-web accepts from the supervisor. */
static void test_pool_job_events(void **state)
{
	(void)state;
	assert_int_equal(check("{\"v\":2,\"type\":\"pool_ready\",\"user\":\"a\",\"pool_id\":3}",
			       proto_pool_ready, false),
			 0);
	const char *ended = "{\"v\":2,\"type\":\"pool_ended\",\"user\":\"a\",\"pool_id\":3,"
			    "\"cause\":\"gone\",\"failed\":true,\"reason\":\"lost\"}";
	const char *const es[][2] = {{"\"failed\":true", "\"failed\":1"}, {"\"cause\":\"gone\"", "\"cause\":\"\""}};
	refuse_each(ended, es, 2, proto_pool_ended, false);
	const char *phase = "{\"v\":2,\"type\":\"job_phase\",\"user\":\"a\",\"pool_id\":3,\"job_id\":4,"
			    "\"phase\":\"training\",\"at_ms\":1700000000000}";
	const char *const ps[][2] = {{"\"at_ms\":1700000000000", "\"at_ms\":-1"},
				     {"\"phase\":\"training\"", "\"phase\":\"x\""}};
	refuse_each(phase, ps, 2, proto_job_phase, false);
	const char *exited = "{\"v\":2,\"type\":\"job_exited\",\"user\":\"a\",\"pool_id\":3,\"job_id\":4,"
			     "\"kind\":\"oom\",\"code\":0,\"signal\":9,\"at_ms\":1,\"reason\":\"r\","
			     "\"failure\":\"\",\"home_full\":false}";
	const char *const xs[][2] = {{"\"code\":0", "\"code\":256"},
				     {",\"home_full\":false", ""},
				     {"\"signal\":9", "\"signal\":129"}};
	refuse_each(exited, xs, 3, proto_job_exited, false);
	const char *sample = "{\"v\":2,\"type\":\"job_sample\",\"user\":\"a\",\"pool_id\":3,\"job_id\":4,"
			     "\"at_ms\":1,\"cpu_usage_us\":10,\"memory_bytes\":20,"
			     "\"memory_limit_bytes\":0,\"io_wait_us\":-1,\"log_bytes\":5}";
	const char *const sm[][2] = {{"\"io_wait_us\":-1", "\"io_wait_us\":-2"},
				     {"\"log_bytes\":5", "\"log_bytes\":-5"},
				     {"\"v\":2,", "\"v\":2,\"id\":1,"}};
	refuse_each(sample, sm, 3, proto_job_sample, false);
	assert_true(proto_phase_ok("uploading"));
	assert_false(proto_phase_ok("upload"));
	assert_false(proto_phase_ok(""));
	assert_true(proto_exit_kind_ok("stage_failed"));
	assert_true(proto_exit_kind_ok("exited"));
	assert_false(proto_exit_kind_ok("stage"));
}

static void test_error_reply(void **state)
{
	json_t *e = proto_error(9, "bad_request", "why");
	(void)state;
	assert_int_equal(json_integer_value(json_object_get(e, "v")), PROTO_VERSION);
	assert_int_equal(json_integer_value(json_object_get(e, "id")), 9);
	assert_string_equal(json_string_value(json_object_get(e, "type")), "reply");
	assert_false(json_is_true(json_object_get(e, "ok")));
	assert_string_equal(json_string_value(json_object_get(e, "code")), "bad_request");
	json_decref(e);
}

/* Sends text on the web end and lets the supervisor's channel handle it. */
static int feed(struct channel *ch, int web, const char *text)
{
	assert_int_equal(send(web, text, strlen(text), 0), (ssize_t)strlen(text));
	return channel_on_readable(ch);
}

static json_t *answer(int web)
{
	struct pollfd p = {.fd = web, .events = POLLIN};
	json_t *r = NULL;
	assert_int_equal(poll(&p, 1, 1000), 1);
	assert_int_equal(proto_recv(web, &r), 0);
	return r;
}

/* The table: what a fresh channel permits, then what a ready one does. */
static void test_channel_table(void **state)
{
	int sv[2];
	struct channel *ch;
	json_t *r;
	(void)state;

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	ch = channel_new(sv[0], NULL);
	/* before hello only hello is permitted */
	assert_int_equal(feed(ch, sv[1], "{\"v\":2,\"id\":1,\"type\":\"ping\"}"), -EPROTO);
	assert_int_equal(feed(ch, sv[1], "{\"v\":2,\"id\":1,\"type\":\"hello\",\"version\":\"" LABD_VERSION "\"}"), 0);
	r = answer(sv[1]);
	assert_true(json_is_true(json_object_get(r, "ok")));
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 1);
	json_decref(r);
	assert_int_equal(feed(ch, sv[1], "{\"v\":2,\"id\":2,\"type\":\"ping\"}"), 0);
	r = answer(sv[1]);
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 2);
	json_decref(r);
	/* hello once only; unknown types; fields out of bounds; not JSON */
	assert_int_equal(feed(ch, sv[1], "{\"v\":2,\"id\":3,\"type\":\"hello\",\"version\":\"x\"}"), -EPROTO);
	assert_int_equal(feed(ch, sv[1], "{\"v\":2,\"id\":4,\"type\":\"exec\",\"argv\":[\"sh\"]}"), -EPROTO);
	assert_int_equal(feed(ch, sv[1], "{\"v\":2,\"id\":5,\"type\":\"sandbox_stop\",\"user\":\"../root\","
					 "\"runtime_id\":1,\"reason\":\"x\"}"), -EPROTO);
	assert_int_equal(feed(ch, sv[1], "{\"v\":2,\"id\":6,\"type\":\"sandbox_list\",\"all\":true}"), -EPROTO);
	assert_int_equal(feed(ch, sv[1], "nonsense"), -EPROTO);
	/* nothing was answered to any of those */
	assert_int_equal(proto_recv(sv[1], &r), -EAGAIN);
	channel_free(ch);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_descriptor_beside_a_message),
		cmocka_unit_test(test_job_shell_fields),
		cmocka_unit_test(test_rejects_garbage_and_oversize),
		cmocka_unit_test(test_field_checks),
		cmocka_unit_test(test_pool_job_requests),
		cmocka_unit_test(test_pool_job_events),
		cmocka_unit_test(test_error_reply),
		cmocka_unit_test(test_channel_table),
	};
	return cmocka_run_group_tests_name("proto", tests, NULL, NULL);
}
