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

#include "auth/auth.h"
#include "http/router.h"

struct app;
struct proxy_state;
struct workers;

#define HTTP_MAX_EXTRA_HEADERS 6

struct http_request {
	struct MHD_Connection *conn;
	struct app *app;
	const char *method; /* borrowed from libmicrohttpd for the request */
	const char *path;   /* decoded path, no query */
	char *raw_uri;      /* as the client sent it, with the query; owned */
	bool started;       /* the first access-handler call has been seen */
	struct proxy_state *proxy; /* set while proxying to a runtime; owned */
	bool from_upstream;        /* the reply is Jupyter's, with its own headers */
	char *body; /* NUL-terminated; owned */
	size_t body_len, body_cap;
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
 * worker thread (cfg threads, 0 = one per core); returns the pool or NULL.
 * Stop with workers_stop(). */
struct workers *http_start(struct app *app, int listen_fd);

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
void http_reply_redirect(struct http_request *req, const char *location);
/* Serves an open file (the reply owns fd from here on, even on failure). */
void http_reply_fd(struct http_request *req, unsigned status, const char *content_type, int fd,
		   size_t size);
/* Adds a response header, copied; silently bounded to HTTP_MAX_EXTRA_HEADERS. */
void http_add_header(struct http_request *req, const char *name, const char *value);

/* Percent-encodes s for a query value into out (unreserved characters and '/'
 * stay as they are); truncates at a whole escape when out is too small. */
void http_url_encode(const char *s, char *out, size_t outlen);

/* Decodes field `name` of an application/x-www-form-urlencoded body into out;
 * returns 0, or -1 when absent or longer than outlen-1. */
int http_form_field(const char *body, const char *name, char *out, size_t outlen);

#endif
