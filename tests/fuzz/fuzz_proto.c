/* fuzz_proto.c - the supervisor protocol's receive and field checks, the
 * privilege boundary: every message labd (root) reads from labd-web goes
 * through proto_recv and then proto_check against its type's field list. */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "labd/parse.h"
#include "proto/proto.h"

static const struct proto_field *const lists[] = {
	proto_hello, proto_empty, proto_sandbox_start, proto_sandbox_stop, proto_user_deleted,
	proto_home_usage, proto_home_resize, proto_reply, proto_sandbox_ready,
	proto_sandbox_ended, proto_sandbox_warning, proto_pool_start, proto_pool_stop,
	proto_job_run, proto_job_stop, proto_pool_ready, proto_pool_ended, proto_job_phase,
	proto_job_exited, proto_job_sample, proto_job_logs_remove,
};

static int fds[2] = {-1, -1};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	int big = 4 * PROTO_MAX_MESSAGE;
	(void)argc, (void)argv;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) < 0)
		abort();
	setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	return 0;
}

/* Reads every field of a message that passed: what the handlers do next. */
static void read_fields(json_t *msg, const struct proto_field *fields)
{
	for (const struct proto_field *f = fields; f->name; f++) {
		if (f->kind == PROTO_NAME) {
			const char *s = proto_str(msg, f->name);
			FUZZ_ASSERT(s && ((f->optional && !s[0]) || parse_user_name_ok(s)));
		} else if (f->kind == PROTO_STRING || f->kind == PROTO_TOKEN) {
			const char *s = proto_str(msg, f->name);
			/* strlen: a JSON "\u0000" ends the C string early */
			FUZZ_ASSERT(s && (long long)strlen(s) <= f->max);
			if (f->kind == PROTO_TOKEN && !f->optional)
				FUZZ_ASSERT(parse_token_ok(s));
			(void)proto_phase_ok(s);
			(void)proto_exit_kind_ok(s);
		} else if (f->kind == PROTO_INT) {
			long long v = proto_int(msg, f->name);
			FUZZ_ASSERT((f->optional && v == 0) || (v >= f->min && v <= f->max));
		} else if (f->kind == PROTO_BOOL) {
			(void)proto_bool(msg, f->name);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *msg = NULL;
	char err[256];

	if (send(fds[0], data, size, 0) != (ssize_t)size)
		return 0; /* too large for one datagram: the web side cannot send it either */
	int rc = proto_recv(fds[1], &msg);
	FUZZ_ASSERT(rc == 0 || rc == -EPROTO || (rc == 1 && size == 0));
	FUZZ_ASSERT(rc != 0 || (msg && json_is_object(msg) && size <= PROTO_MAX_MESSAGE));
	if (rc != 0)
		return 0;
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
		for (int want_id = 0; want_id < 2; want_id++) {
			err[0] = '\0';
			if (proto_check(msg, lists[i], want_id, err, sizeof(err)) == 0)
				read_fields(msg, lists[i]);
			else
				FUZZ_ASSERT(err[0] != '\0');
		}
	json_decref(msg);
	return 0;
}
