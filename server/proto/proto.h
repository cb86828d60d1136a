/* proto.h - the supervisor protocol, shared by labd (root) and labd-web.
 *
 * Folder rule: proto/ includes only common/ (include/labd/) and jansson. It is
 * root-side code: no store, no HTTP.
 *
 * One JSON object per SOCK_SEQPACKET message, at most PROTO_MAX_MESSAGE bytes:
 *   {"v":2, "type":T, "id":N, ...fields}
 * Requests (web -> supervisor) carry an id; the reply to request N is
 *   {"v":2, "type":"reply", "id":N, "ok":true, ...} or
 *   {"v":2, "type":"reply", "id":N, "ok":false, "code":C, "message":M}
 * and comes when the work is done, possibly after other replies and events.
 * Events (supervisor -> web) have no id and are pushed unasked:
 *   sandbox_ready, sandbox_ended, sandbox_warning.
 *
 * The field lists below are the contract. Each side has one table that names,
 * for every type it accepts, these fields, the channel states that may send it
 * and its handler (supervisor/channel.c, backend/local.c); a message that is
 * unknown, unpermitted or carries a field out of bounds ends the channel. */
#ifndef LABD_PROTO_H
#define LABD_PROTO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define PROTO_VERSION 2
#define PROTO_MAX_MESSAGE 65536
#define PROTO_MAX_FIELDS 10

enum proto_kind {
	PROTO_STRING,    /* min..max = length in bytes */
	PROTO_NAME,      /* a user name: ^[a-z][a-z0-9_-]{0,31}$ */
	PROTO_TOKEN,     /* [A-Za-z0-9_-], min..max characters */
	PROTO_INT,       /* min..max = value */
	PROTO_BOOL,
	PROTO_INT_ARRAY, /* min..max = length; each element an integer >= 0 */
	PROTO_LIST,      /* an array whose elements the reader checks */
};

struct proto_field {
	const char *name;
	enum proto_kind kind;
	long long min, max;
	bool optional;
};

/* Field lists, NULL-name terminated; see the header comment. */
extern const struct proto_field proto_hello[];
extern const struct proto_field proto_empty[];
extern const struct proto_field proto_sandbox_start[];
extern const struct proto_field proto_sandbox_stop[];
extern const struct proto_field proto_user_deleted[];
extern const struct proto_field proto_home_usage[];
extern const struct proto_field proto_home_resize[];
extern const struct proto_field proto_reply[];
extern const struct proto_field proto_sandbox_ready[];
extern const struct proto_field proto_sandbox_ended[];
extern const struct proto_field proto_sandbox_warning[];

/* Why a sandbox ended (sandbox_ended's "cause"). */
#define PROTO_CAUSES "requested time_limit oom exited signaled start_failed gone"

/* Sends msg (not consumed) as one message. 0 or a negative errno. */
int proto_send(int fd, json_t *msg);
/* Receives one message without waiting. 0 with *out owned by the caller, 1 on
 * orderly EOF, -EAGAIN when nothing is there, -EPROTO for a message that is
 * oversized or not a JSON object, another negative errno on error. */
int proto_recv(int fd, json_t **out);

/* Checks the envelope (version; id when want_id) and that msg's other fields
 * are exactly those of fields, each of its kind and in bounds. 0, or -EPROTO
 * with the reason in err. */
int proto_check(json_t *msg, const struct proto_field *fields, bool want_id, char *err,
		size_t errlen);

/* New messages; the caller owns them. id < 0 leaves the id out (events). */
json_t *proto_msg(const char *type, long long id);
json_t *proto_ok(long long id);
json_t *proto_error(long long id, const char *code, const char *message);

/* Field readers for a checked message (the value is known to be there and
 * of the right kind, except optional ones: "" / 0 / false when absent). */
const char *proto_str(json_t *msg, const char *name);
long long proto_int(json_t *msg, const char *name);
bool proto_bool(json_t *msg, const char *name);

#endif
