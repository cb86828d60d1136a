/* http.h - the request object handlers see, and the reply helpers.
 *
 * One struct http_request per HTTP request: created when libmicrohttpd first
 * reports it, released by the completion callback; it owns the body buffer,
 * the extra response headers and the queued response. The struct is opaque
 * (defined in http.c): handlers read the request with the accessors below and
 * set exactly one reply with an http_reply_* function; the dispatcher adds the
 * security headers to every reply. */
#ifndef LABD_HTTP_H
#define LABD_HTTP_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

#include "store/identity.h"
#include "labd/buf.h"
#include "http/router.h"

struct app;
struct http_request;

/* A handler, registered for a path prefix (as h2o's on_req): the transport
 * never names what it serves. A buffered handler gets the whole body (at most
 * [http] max_body) in on_request; a streaming one gets the request as soon as
 * its head is there and the body piece by piece, nothing buffered. */
struct http_handler {
	const char *prefix; /* matched against the decoded path; "/" matches all */
	bool streaming;
	/* buffered: called once, with the body; sets exactly one reply */
	void (*on_request)(struct http_request *req);
	/* streaming: begin sets a reply, or sets its stream state and takes over */
	void (*begin)(struct http_request *req);
	enum MHD_Result (*upload)(struct http_request *req, const char *data, size_t *size);
	/* the body is done: queue the reply (parking the connection meanwhile) */
	enum MHD_Result (*respond)(struct http_request *req);
	/* the request is over: free the stream state */
	void (*release)(struct http_request *req);
	/* buffered, optional: whether the request carries valid credentials,
	 * asked before its body is read; without them at most
	 * [server] max_unauthenticated_body is held */
	bool (*authenticated)(struct http_request *req);
};
struct workers;

#define HTTP_MAX_EXTRA_HEADERS 6

/* Starts libmicrohttpd on an already bound listening socket: one daemon per
 * worker thread (cfg threads, 0 = one per core), serving with handlers[0..n)
 * (borrowed until stopped; the first whose prefix matches wins); returns the
 * workers or NULL. Stop with workers_stop(). */
struct workers *http_start(struct app *app, int listen_fd, const struct http_handler *handlers,
			   size_t n);
/* The error body {"error":{"code":code,"message":message}}; caller owns it. */
json_t *http_error_json(const char *code, const char *message);

/* Request accessors: values are borrowed for the request's lifetime. */
/* The application state the server was started with. */
struct app *http_app(const struct http_request *req);
/* The request's identity, stored in the request (AUTH_NONE until auth_identify fills it). */
struct auth_identity *http_identity(struct http_request *req);
/* The request's route match, stored in the request: the router fills it, handlers read it. */
struct route_match *http_match(struct http_request *req);
/* The method as sent ("GET", ...). */
const char *http_method(const struct http_request *req);
/* The decoded path, without the query. */
const char *http_path(const struct http_request *req);
/* The URI exactly as the client sent it, query included. */
const char *http_raw_uri(const struct http_request *req);
/* The client's address as text ("unknown" when libmicrohttpd has none). */
const char *http_address(const struct http_request *req);
/* A buffered handler's body, NUL-terminated ("" when none came); its length
 * in *len unless len is NULL. */
const char *http_body(const struct http_request *req, size_t *len);
/* The libmicrohttpd connection, for suspend/resume and upgrades. */
struct MHD_Connection *http_connection(const struct http_request *req);
/* A streaming handler's state: NULL until it sets one; its release frees it. */
void *http_stream_state(const struct http_request *req);
void http_set_stream_state(struct http_request *req, void *state);
/* True once a reply has been set. */
bool http_has_reply(const struct http_request *req);
/* The status of the reply set so far; 0 when none. */
unsigned http_status(const struct http_request *req);
const char *http_header(struct http_request *req, const char *name);
const char *http_query(struct http_request *req, const char *name);
const char *http_cookie(struct http_request *req, const char *name);
bool http_method_is(const struct http_request *req, const char *method);
/* True for POST, PUT, PATCH and DELETE. */
bool http_is_state_changing(const struct http_request *req);
/* True when the request's Content-Type media type equals type (parameters ignored). */
bool http_content_type_is(struct http_request *req, const char *type);

/* From a buffered handler: runs fn, which sets the reply, on a thread of its
 * own (http/offload.h) while the connection waits suspended, so that work
 * that blocks for long (a password hash, a call to the identity provider)
 * does not hold up the other connections of this worker. The handler then
 * returns without a reply. Should no thread start, fn runs at once. */
void http_run_detached(struct http_request *req, void (*fn)(struct http_request *req));

/* Replies. Each replaces any reply set before. */
void http_reply_json(struct http_request *req, unsigned status, json_t *body); /* steals body */
void http_reply_error(struct http_request *req, unsigned status, const char *code,
		      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void http_reply_empty(struct http_request *req, unsigned status);
/* 500 internal, for a store failure: nothing was changed. */
void http_reply_internal(struct http_request *req);
/* 503 state_disk_full with Retry-After: the store cannot write (db_full, db_room).
 * http_reply_internal answers this instead of 500 while the store is full. */
void http_reply_disk_full(struct http_request *req);
void http_reply_redirect(struct http_request *req, const char *location);
/* Serves an open file (the reply owns fd from here on, even on failure). */
void http_reply_fd(struct http_request *req, unsigned status, const char *content_type, int fd,
		   size_t size);
/* Replies with a response built elsewhere (a stream); takes resp. NULL: 500. */
void http_reply_response(struct http_request *req, unsigned status, struct MHD_Response *resp);
/* Replies with an upstream's response (the proxy): takes resp, which carries
 * the upstream's own headers, so labd's security headers are not added. */
void http_reply_upstream(struct http_request *req, unsigned status, struct MHD_Response *resp);
/* Adds a response header, copied; silently bounded to HTTP_MAX_EXTRA_HEADERS. */
void http_add_header(struct http_request *req, const char *name, const char *value);

/* Percent-encodes s for a query value into out (unreserved characters and '/'
 * stay as they are); truncates at a whole escape when out is too small. */
void http_url_encode(const char *s, char *out, size_t outlen);

/* Decodes field `name` of an application/x-www-form-urlencoded body into out;
 * returns 0, or -1 when absent or longer than outlen-1. */
int http_form_field(const char *body, const char *name, char *out, size_t outlen);

#endif
