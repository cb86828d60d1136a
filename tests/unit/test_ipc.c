/* Unit tests: the supervisor protocol's framing and validation over a real
 * SOCK_SEQPACKET socketpair. */
#include "unit.h"

#include <sys/socket.h>

#include "proto/ipc.h"

static void test_roundtrip(void **state)
{
	int sv[2];
	json_t *msg = ipc_reply(7, "ping"), *got;
	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(ipc_send(sv[0], msg), 0);
	assert_int_equal(ipc_recv(sv[1], &got, 1000), 0);
	assert_true(json_equal(msg, got));
	json_decref(got);
	json_decref(msg);
	assert_int_equal(ipc_recv(sv[1], &got, 10), -1); /* nothing more: timeout */
	close(sv[0]);
	assert_int_equal(ipc_recv(sv[1], &got, 1000), 1); /* EOF */
	close(sv[1]);
}

static void test_rejects_garbage_and_oversize(void **state)
{
	int sv[2];
	json_t *got;
	char *big = malloc(IPC_MAX_MESSAGE + 100);
	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(send(sv[0], "not json", 8, 0), 8);
	assert_int_equal(ipc_recv(sv[1], &got, 1000), -1);
	assert_int_equal(send(sv[0], "[1]", 3, 0), 3);
	assert_int_equal(ipc_recv(sv[1], &got, 1000), -1);
	memset(big, ' ', IPC_MAX_MESSAGE + 100);
	big[0] = '{';
	big[IPC_MAX_MESSAGE + 99] = '}';
	assert_int_equal(send(sv[0], big, IPC_MAX_MESSAGE + 100, 0), IPC_MAX_MESSAGE + 100);
	assert_int_equal(ipc_recv(sv[1], &got, 1000), -1);
	assert_null(got);
	free(big);
	close(sv[0]);
	close(sv[1]);
}

static int parse(const char *text, struct ipc_request *req)
{
	char err[128];
	json_t *msg = json_loads(text, 0, NULL);
	assert_non_null(msg);
	int rc = ipc_parse_request(msg, req, err, sizeof(err));
	json_decref(msg);
	return rc;
}

static void test_validation(void **state)
{
	struct ipc_request req;
	(void)state;
	assert_int_equal(parse("{\"v\":1,\"id\":3,\"type\":\"ping\"}", &req), 0);
	assert_int_equal(req.id, 3);
	assert_string_equal(req.type, "ping");
	assert_int_equal(parse("{\"v\":1,\"id\":4,\"type\":\"version\"}", &req), 0);
	assert_int_equal(parse("{\"v\":2,\"id\":3,\"type\":\"ping\"}", &req), -1);
	assert_int_equal(parse("{\"id\":3,\"type\":\"ping\"}", &req), -1);
	assert_int_equal(parse("{\"v\":1,\"id\":-1,\"type\":\"ping\"}", &req), -1);
	assert_int_equal(parse("{\"v\":1,\"id\":\"3\",\"type\":\"ping\"}", &req), -1);
	assert_int_equal(parse("{\"v\":1,\"id\":3,\"type\":\"rm -rf\"}", &req), -1);
	assert_int_equal(parse("{\"v\":1,\"id\":3,\"type\":\"ping\",\"x\":1}", &req), -1);
	assert_int_equal(parse("{\"v\":1,\"id\":5,\"type\":\"runtime_stop\",\"user\":\"a\",\"reason\":\"x\"}", &req), 0);
	assert_int_equal(parse("{\"v\":1,\"id\":5,\"type\":\"runtime_stop\",\"user\":\"a\"}", &req), -1);
	assert_int_equal(parse("{\"v\":1,\"id\":5,\"type\":\"runtime_stop\",\"user\":1,\"reason\":\"x\"}", &req), -1);
}

static void test_error_reply(void **state)
{
	json_t *e = ipc_error(9, "bad_request", "why");
	(void)state;
	assert_int_equal(json_integer_value(json_object_get(e, "v")), IPC_VERSION);
	assert_int_equal(json_integer_value(json_object_get(e, "id")), 9);
	assert_string_equal(json_string_value(json_object_get(e, "type")), "error");
	assert_string_equal(json_string_value(json_object_get(e, "code")), "bad_request");
	json_decref(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_rejects_garbage_and_oversize),
		cmocka_unit_test(test_validation),
		cmocka_unit_test(test_error_reply),
	};
	return cmocka_run_group_tests_name("ipc", tests, NULL, NULL);
}
