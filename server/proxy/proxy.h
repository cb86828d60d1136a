/* proxy.h - the reverse proxy from /user/<name>/ to that user's Jupyter over
 * its Unix socket: HTTP/1.1 with pooled keep-alive upstream connections,
 * bodies streamed both ways through bounded buffers (never a whole file in
 * memory), hop-by-hop headers handled per RFC 9110 section 7.6.1, responses
 * parsed with http-parser, Jupyter's token added upstream and scrubbed from
 * everything sent back, WebSocket upgrades handed to the relay. */
#ifndef LABD_PROXY_H
#define LABD_PROXY_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/upstream.h"
#include "proxy/wsrelay.h"

struct http_request;
struct wsrelay;

struct proxy_target {
	char socket_path[UPSTREAM_PATH_MAX]; /* Jupyter's socket as seen from the host */
	char token[65];                      /* Jupyter's token: never sent to clients */
	char owner[33];                      /* user name, groups WebSocket relays */
	uid_t peer_uid;                      /* the sandbox's host uid: who must answer */
	int64_t owner_id;
};

struct proxy_context {
	struct wsrelay *relay;
	bool secure; /* X-Forwarded-Proto https */
};

/* Starts proxying req (first access-handler call, headers known): connects
 * upstream and queues the request head. Returns 0, or -1 with a reply set
 * (502 when the runtime's socket does not answer). */
int proxy_begin(struct http_request *req, const struct proxy_context *ctx,
		const struct proxy_target *target);
/* Forwards an upload piece; updates *size to what is left unsent (the
 * connection is parked until upstream can take more). */
enum MHD_Result proxy_upload(struct http_request *req, const char *data, size_t *size);
/* The last access-handler call: finishes the upload, reads the response head
 * (parking the connection while it is not there) and queues the response. */
enum MHD_Result proxy_respond(struct http_request *req);
/* Releases the proxy state of a finished request (its upstream connection goes
 * back to the pool only after a complete exchange). */
void proxy_release(struct http_request *req);

/* Ends the proxied requests in flight that scope and id name (an account
 * event; the same rule as wsrelay_close): parked ones are woken and answered
 * 403, streaming responses are cut. Any thread; returns how many. */
int proxy_cancel(enum wsrelay_scope scope, int64_t id);

/* Pure helpers, exposed for tests. */
/* True for headers that describe one connection and are never forwarded. */
bool proxy_is_hop_header(const char *name);
/* Removes the cookie named name from a Cookie header value into out. */
void proxy_strip_cookie(const char *value, const char *name, char *out, size_t outlen);

#endif
