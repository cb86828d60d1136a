/* ipc.h - the supervisor protocol: one JSON object per SOCK_SEQPACKET message
 * over the socketpair between labd (root) and labd-web.
 *
 * Requests (web -> supervisor), every listed field required:
 *   ping, version, runtime_list
 *   runtime_start {user, user_id, kind "cpu"|"gpu", token, deadline (unix s), gpus [int]}
 *   runtime_stop  {user, reason}
 * Replies: {"v":1,"id":N,"type":"pong"|"version"|"ok"|"runtimes"|"error", ...}
 * Every message is at most IPC_MAX_MESSAGE bytes; the receiver validates the
 * version, the id, the type and refuses unknown fields before acting. */
#ifndef LABD_IPC_H
#define LABD_IPC_H

#include <jansson.h>
#include <stddef.h>

#define IPC_VERSION 1
#define IPC_MAX_MESSAGE 65536

/* Sends msg (not consumed) as one message; 0 or -1. */
int ipc_send(int fd, json_t *msg);
/* Receives one message, waiting up to timeout_ms (-1 = forever). Returns 0 with
 * *out owned by the caller, 1 on orderly EOF, -1 on error, timeout or a message
 * that is oversized or not a JSON object. */
int ipc_recv(int fd, json_t **out, int timeout_ms);

struct ipc_request {
	long long id;
	const char *type; /* static name of the validated type */
	json_t *msg;      /* the message, borrowed; its fields have the right types */
};
/* Validates a request against the protocol (version, id, known type, no
 * unknown fields). Returns 0, or -1 with a reason in err. */
int ipc_parse_request(json_t *msg, struct ipc_request *out, char *err, size_t errlen);
/* The reply to a request; caller owns it. */
json_t *ipc_reply(long long id, const char *type);
json_t *ipc_error(long long id, const char *code, const char *message);

/* The web side's client: thread-safe, one call at a time. */
struct ipc_client;
/* Wraps fd (owned by the client from here on). NULL on allocation failure. */
struct ipc_client *ipc_client_new(int fd);
void ipc_client_free(struct ipc_client *c);
/* Sends {"type":type, ...params} and waits up to 2 s for the matching reply;
 * params may be NULL and is not consumed. On 0 *reply is owned by the caller. */
int ipc_client_call(struct ipc_client *c, const char *type, json_t *params, json_t **reply);

#endif
