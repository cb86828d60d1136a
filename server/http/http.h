/* http.h - the request object handlers see, and the reply helpers.
 *
 * One struct http_request per HTTP request: created when libmicrohttpd first
 * reports it, released by the completion callback; it owns the body buffer,
 * the extra response headers and the queued response. Handlers read the
 * request with the getters and set exactly one reply with an http_reply_*
 * function; the dispatcher adds the security headers to every reply. */
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
	/* streaming: begin sets a reply, or sets req->stream and takes over */
	void (*begin)(struct http_request *req);
	enum MHD_Result (*upload)(struct http_request *req, const char *data, size_t *size);
	/* the body is done: queue the reply (parking the connection meanwhile) */
	enum MHD_Result (*respond)(struct http_request *req);
	/* the request is over: free req->stream */
	void (*release)(struct http_request *req);
};
struct workers;

#define HTTP_MAX_EXTRA_HEADERS 6

struct http_request {
	struct MHD_Connection *conn;
	struct app *app;
	const char *method; /* borrowed from libmicrohttpd for the request */
	const char *path;   /* decoded path, no query */
	char *raw_uri;      /* as the client sent it, with the query; owned */
	bool started;       /* the first access-handler call has been seen */
	const struct http_handler *handler; /* the one serving this request */
	void *stream; /* a streaming handler's state; freed by its release */
	bool from_upstream;        /* the reply is Jupyter's, with its own headers */
	struct buf body; /* at most max_body bytes; body.data is NULL when none came */
	bool body_too_large;
	char address[64];
	struct auth_identity auth;
	struct route_match match;
	/* the reply */
	unsigned status;
	struct MHD_Response *response;
	int nextra;
	char *extra[HTTP_MAX_EXTRA_HEADERS][2];
};

/* Starts libmicrohttpd on an already bound listening socket: one daemon per
 * worker thread (cfg threads, 0 = one per core), serving with handlers[0..n)
 * (borrowed until stopped; the first whose prefix matches wins); returns the
 * pool or NULL. Stop with workers_stop(). */
struct workers *http_start(struct app *app, int listen_fd, const struct http_handler *handlers,
			   size_t n);
/* The error body {"error":{"code":code,"message":message}}; caller owns it. */
json_t *http_error_json(const char *code, const char *message);

/* Request accessors: values are borrowed for the request's lifetime. */
const char *http_header(struct http_request *req, const char *name);
const char *http_query(struct http_request *req, const char *name);
const char *http_cookie(struct http_request *req, const char *name);
bool http_method_is(const struct http_request *req, const char *method);
/* True for POST, PUT, PATCH and DELETE. */
bool http_is_state_changing(const struct http_request *req);
/* True when the request's Content-Type media type equals type (parameters ignored). */
bool http_content_type_is(struct http_request *req, const char *type);

/* Replies. Each replaces any reply set before. */
void http_reply_json(struct http_request *req, unsigned status, json_t *body); /* steals body */
void http_reply_error(struct http_request *req, unsigned status, const char *code,
		      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void http_reply_empty(struct http_request *req, unsigned status);
/* 500 internal, for a store failure: nothing was changed. */
void http_reply_internal(struct http_request *req);
void http_reply_redirect(struct http_request *req, const char *location);
/* Serves an open file (the reply owns fd from here on, even on failure). */
void http_reply_fd(struct http_request *req, unsigned status, const char *content_type, int fd,
		   size_t size);
/* Replies with a response built elsewhere (a stream); takes resp. NULL: 500. */
void http_reply_response(struct http_request *req, unsigned status, struct MHD_Response *resp);
/* Adds a response header, copied; silently bounded to HTTP_MAX_EXTRA_HEADERS. */
void http_add_header(struct http_request *req, const char *name, const char *value);

/* Percent-encodes s for a query value into out (unreserved characters and '/'
 * stay as they are); truncates at a whole escape when out is too small. */
void http_url_encode(const char *s, char *out, size_t outlen);

/* Decodes field `name` of an application/x-www-form-urlencoded body into out;
 * returns 0, or -1 when absent or longer than outlen-1. */
int http_form_field(const char *body, const char *name, char *out, size_t outlen);

#endif
