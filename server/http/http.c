/* http.c - libmicrohttpd plumbing: request lifetime, bounded bodies, replies
 * and the headers every response carries; see http.h. */
#include "http/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "labd/app.h"
#include "config/config.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "http/framing.h"
#include "http/guard.h"
#include "http/offload.h"
#include "http/workers.h"
#include "http/forwarded.h"
#include "store/db.h"

#define HTTP_CONNECTION_POOL_BYTES (32 * 1024) /* see http_start */

/* The request object; opaque outside this file (handlers use the accessors). */
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
	/* http_run_detached's handler, and whether it has set the reply */
	void (*detached)(struct http_request *req);
	atomic_bool detached_done;
	struct buf body; /* at most body_max bytes; body.data is NULL when none came */
	size_t body_max; /* max_body, or max_unauthenticated_body before authentication */
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

/* Sent on every response, including errors and static files. */
static const char *const security_headers[][2] = {
	{"Content-Security-Policy",
	 "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
	 "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"},
	{"X-Frame-Options", "DENY"},
	{"X-Content-Type-Options", "nosniff"},
	{"Referrer-Policy", "same-origin"},
};

struct app *http_app(const struct http_request *req)
{
	return req->app;
}

struct auth_identity *http_identity(struct http_request *req)
{
	return &req->auth;
}

struct route_match *http_match(struct http_request *req)
{
	return &req->match;
}

const char *http_method(const struct http_request *req)
{
	return req->method;
}

const char *http_path(const struct http_request *req)
{
	return req->path;
}

const char *http_raw_uri(const struct http_request *req)
{
	return req->raw_uri;
}

const char *http_address(const struct http_request *req)
{
	return req->address;
}

const char *http_body(const struct http_request *req, size_t *len)
{
	if (len)
		*len = req->body.len;
	return buf_str(&req->body);
}

struct MHD_Connection *http_connection(const struct http_request *req)
{
	return req->conn;
}

void *http_stream_state(const struct http_request *req)
{
	return req->stream;
}

void http_set_stream_state(struct http_request *req, void *state)
{
	req->stream = state;
}

bool http_has_reply(const struct http_request *req)
{
	return req->response != NULL;
}

unsigned http_status(const struct http_request *req)
{
	return req->status;
}

const char *http_header(struct http_request *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

const char *http_query(struct http_request *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *http_cookie(struct http_request *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_COOKIE_KIND, name);
}

bool http_method_is(const struct http_request *req, const char *method)
{
	return strcmp(req->method, method) == 0;
}

bool http_is_state_changing(const struct http_request *req)
{
	return http_method_is(req, "POST") || http_method_is(req, "PUT") ||
	       http_method_is(req, "PATCH") || http_method_is(req, "DELETE");
}

bool http_content_type_is(struct http_request *req, const char *type)
{
	const char *ct = http_header(req, "Content-Type");
	size_t n = strlen(type);

	if (!ct || strncasecmp(ct, type, n) != 0)
		return false;
	return ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ';
}

static void set_reply(struct http_request *req, unsigned status, struct MHD_Response *resp)
{
	if (req->response)
		MHD_destroy_response(req->response);
	req->response = resp;
	req->status = status;
}

void http_add_header(struct http_request *req, const char *name, const char *value)
{
	if (req->nextra >= HTTP_MAX_EXTRA_HEADERS) {
		log_warn("dropped response header %s: too many", name);
		return;
	}
	req->extra[req->nextra][0] = strdup(name);
	req->extra[req->nextra][1] = strdup(value);
	req->nextra++;
}

static void reply_text(struct http_request *req, unsigned status, const char *ctype,
		       const char *cache, const char *text, size_t len)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);
	if (!resp) {
		set_reply(req, 0, NULL);
		return;
	}
	MHD_add_response_header(resp, "Content-Type", ctype);
	MHD_add_response_header(resp, "Cache-Control", cache);
	set_reply(req, status, resp);
}

void http_reply_json(struct http_request *req, unsigned status, json_t *body)
{
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (!text) {
		set_reply(req, 0, NULL);
		return;
	}
	reply_text(req, status, "application/json", "no-store", text, strlen(text));
	free(text);
}

void http_reply_error(struct http_request *req, unsigned status, const char *code,
		      const char *fmt, ...)
{
	char message[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	http_reply_json(req, status, http_error_json(code, message));
}

json_t *http_error_json(const char *code, const char *message)
{
	return json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", message);
}

void http_reply_disk_full(struct http_request *req)
{
	http_add_header(req, "Retry-After", "30");
	http_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, "state_disk_full",
			 "the state disk is full: labd cannot record changes until space is "
			 "freed there; nothing was changed");
}

void http_reply_internal(struct http_request *req)
{
	/* a store write that failed for want of space is the disk's doing */
	if (req->app && req->app->db && db_full(req->app->db)) {
		http_reply_disk_full(req);
		return;
	}
	http_reply_error(req, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal",
			 "internal error; nothing was changed");
}

void http_reply_empty(struct http_request *req, unsigned status)
{
	reply_text(req, status, "text/plain", "no-store", "", 0);
}

void http_reply_redirect(struct http_request *req, const char *location)
{
	reply_text(req, MHD_HTTP_SEE_OTHER, "text/plain", "no-store", "", 0);
	if (req->response)
		MHD_add_response_header(req->response, "Location", location);
}

void http_reply_fd(struct http_request *req, unsigned status, const char *content_type, int fd,
		   size_t size)
{
	struct MHD_Response *resp = MHD_create_response_from_fd(size, fd);
	if (!resp) {
		close(fd);
		set_reply(req, 0, NULL);
		return;
	}
	MHD_add_response_header(resp, "Content-Type", content_type);
	set_reply(req, status, resp);
}

void http_reply_response(struct http_request *req, unsigned status, struct MHD_Response *resp)
{
	set_reply(req, resp ? status : 0, resp);
}

void http_reply_upstream(struct http_request *req, unsigned status, struct MHD_Response *resp)
{
	set_reply(req, resp ? status : 0, resp);
	req->from_upstream = resp != NULL;
}

void http_url_encode(const char *s, char *out, size_t outlen)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (const unsigned char *p = (const unsigned char *)s; *p && o + 4 < outlen; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		    strchr("-_.~/", *p)) {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	if (outlen)
		out[o] = '\0';
}

int http_form_field(const char *body, const char *name, char *out, size_t outlen)
{
	size_t nlen = strlen(name);

	for (const char *p = body; p && *p;) {
		const char *end = strchr(p, '&');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len > nlen && p[nlen] == '=' && strncmp(p, name, nlen) == 0) {
			size_t vlen = len - nlen - 1;
			if (vlen >= outlen)
				return -1;
			memcpy(out, p + nlen + 1, vlen);
			out[vlen] = '\0';
			/* Forms encode spaces as '+', which MHD's decoder leaves alone. */
			for (char *c = out; *c; c++)
				if (*c == '+')
					*c = ' ';
			MHD_http_unescape(out);
			return 0;
		}
		p = end ? end + 1 : NULL;
	}
	return -1;
}

/* The client: the peer, or behind a trusted front proxy the address its
 * X-Forwarded-For names (throttling and the audit log key on it). */
static void client_address(const struct labd_config *cfg, struct MHD_Connection *conn,
			   char *out, size_t outlen)
{
	static atomic_bool warned;
	const char *peer = guard_peer(conn);
	const char *xff = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Forwarded-For");

	forwarded_client(cfg, peer, xff, out, outlen);
	/* Once: a front proxy that is not configured makes every client share the
	 * proxy's address for throttling (see docs/security.md, section 6). */
	if (xff && !forwarded_trusted(cfg, peer) && !atomic_exchange(&warned, true))
		log_warn("x-forwarded-for from %s ignored: not in [server] trusted_proxies", peer);
}

/* Behind a trusted front proxy every client shares the proxy's address, so
 * its connections are exempt from the per-address cap at accept; the cap
 * counts each request's forwarded client instead, once its head names it.
 * 0, or -EBUSY with a 429 set when that client is over the cap. */
static int hold_client(struct http_request *req)
{
	const struct labd_config *cfg = req->app->cfg;
	unsigned cap = cfg->max_connections_per_address;

	if (!cap || !forwarded_trusted(cfg, guard_peer(req->conn)) ||
	    guard_hold_client(req->conn, req->address, cap) == 0)
		return 0;
	http_reply_error(req, MHD_HTTP_TOO_MANY_REQUESTS, "too_many_connections",
			 "more than %u requests at once from %s", cap, req->address);
	http_add_header(req, "Retry-After", "1");
	return -EBUSY;
}

static void request_free(struct http_request *req)
{
	if (!req)
		return;
	if (req->handler && req->handler->release)
		req->handler->release(req);
	free(req->raw_uri);
	if (req->response)
		MHD_destroy_response(req->response);
	for (int i = 0; i < req->nextra; i++) {
		free(req->extra[i][0]);
		free(req->extra[i][1]);
	}
	buf_release(&req->body);
	free(req);
}

/* Appends upload bytes, refusing to hold more than max_body in memory. */
static void body_append(struct http_request *req, const char *data, size_t len)
{
	if (req->body_too_large || buf_add(&req->body, data, len) < 0)
		req->body_too_large = true;
}

static enum MHD_Result queue_reply(struct http_request *req)
{
	if (!req->response) {
		http_reply_error(req, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal",
				 "the server could not build a response");
		if (!req->response)
			return MHD_NO;
	}
	/* A runtime's pages carry Jupyter's own policy, which its inline scripts
	 * need; labd's strict one covers labd's pages and errors. */
	for (size_t i = 0; !req->from_upstream && i < sizeof(security_headers) / sizeof(security_headers[0]);
	     i++)
		MHD_add_response_header(req->response, security_headers[i][0],
					security_headers[i][1]);
	for (int i = 0; i < req->nextra; i++)
		MHD_add_response_header(req->response, req->extra[i][0], req->extra[i][1]);
	return MHD_queue_response(req->conn, req->status, req->response);
}

static bool declared_too_large(struct http_request *req)
{
	const char *cl = http_header(req, "Content-Length");
	char *end;
	unsigned long long n;

	if (!cl)
		return false;
	n = strtoull(cl, &end, 10);
	return *end == '\0' && n > req->body_max;
}

static void reply_too_large(struct http_request *req)
{
	http_reply_error(req, MHD_HTTP_CONTENT_TOO_LARGE, "body_too_large",
			 "request body is larger than the %zu bytes allowed", req->body_max);
}

/* What http_start serves with; the MHD callbacks' closure. */
struct http_server {
	struct app *app;
	const struct http_handler *handlers;
	size_t n;
};

static const struct http_handler *find_handler(const struct http_server *srv, const char *path)
{
	for (size_t i = 0; i < srv->n; i++)
		if (strncmp(path, srv->handlers[i].prefix, strlen(srv->handlers[i].prefix)) == 0)
			return &srv->handlers[i];
	return NULL;
}

/* The first call: the head is there, the body not yet. */
/* The deadline for what a connection must send next, from now. */
static long long deadline_in(long long s)
{
	return clock_ms() + s * 1000;
}

static enum MHD_Result on_head(struct http_server *srv, struct http_request *req)
{
	const struct labd_config *cfg = req->app->cfg;
	char why[128];

	/* Framing two parsers could read differently (request smuggling) is
	 * refused before any handler, so none of it can reach Jupyter. */
	if (http_framing_check(req->conn, why, sizeof(why)) < 0) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_framing", "%s", why);
		return queue_reply(req);
	}
	req->handler = find_handler(srv, req->path);
	if (!req->handler) {
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no such resource");
		return queue_reply(req);
	}
	if (req->handler->streaming) {
		/* streamed both ways: no body limit, no buffering; the proxy and
		 * the event streams keep deadlines of their own */
		guard_set_deadline(req->conn, 0);
		req->handler->begin(req);
		return req->response ? queue_reply(req) : MHD_YES;
	}
	/* Before authentication only a small body is held in memory (a login
	 * form); the whole of it must come within the body deadline. */
	if (req->handler->authenticated && !req->handler->authenticated(req) &&
	    cfg->max_unauthenticated_body_bytes < req->body_max) {
		req->body_max = cfg->max_unauthenticated_body_bytes;
		buf_init(&req->body, req->body_max);
	}
	guard_set_deadline(req->conn, deadline_in(cfg->request_body_timeout_s));
	/* Refuse a declared oversized body before reading any of it. */
	if (declared_too_large(req)) {
		reply_too_large(req);
		return queue_reply(req);
	}
	return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **con_cls)
{
	struct http_server *srv = cls;
	struct http_request *req = *con_cls;
	(void)version;

	if (!req)
		return MHD_NO; /* on_uri always makes one */
	if (!req->started) {
		req->started = true;
		req->conn = conn;
		req->app = srv->app;
		req->method = method;
		req->path = url;
		req->body_max = req->app->cfg->max_body_bytes;
		buf_init(&req->body, req->body_max);
		client_address(req->app->cfg, conn, req->address, sizeof(req->address));
		if (hold_client(req) < 0)
			return queue_reply(req);
		return on_head(srv, req);
	}
	if (req->stream) {
		if (*upload_data_size)
			return req->handler->upload(req, upload_data, upload_data_size);
		enum MHD_Result rc = req->handler->respond(req);
		return rc == MHD_YES && req->response ? queue_reply(req) : rc;
	}
	if (*upload_data_size) {
		body_append(req, upload_data, *upload_data_size);
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (req->detached) /* called again once its thread resumed the connection */
		return atomic_load(&req->detached_done) ? queue_reply(req) : MHD_YES;
	guard_set_deadline(conn, 0); /* the body is in; the reply is ours to send */
	if (req->body_too_large)
		reply_too_large(req);
	else
		req->handler->on_request(req);
	/* suspended: the reply is queued when libmicrohttpd calls again */
	return req->detached ? MHD_YES : queue_reply(req);
}

static void detached_main(void *arg)
{
	struct http_request *req = arg;

	req->detached(req);
	atomic_store(&req->detached_done, true);
	workers_resume(req->conn);
}

void http_run_detached(struct http_request *req, void (*fn)(struct http_request *req))
{
	/* Suspended before the thread starts, which may resume it at once;
	 * libmicrohttpd neither reads nor times out a suspended connection, so
	 * the request stays the thread's until it resumes. */
	req->detached = fn;
	MHD_suspend_connection(req->conn);
	if (offload_run(detached_main, req) < 0)
		detached_main(req); /* at the cap or shutting down: here, as before */
}

/* Called before the request is parsed: keeps the URI exactly as sent (the
 * proxy forwards it unchanged) and creates the request object. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct http_request *req = calloc(1, sizeof(*req));
	(void)cls;
	(void)conn;
	if (req)
		req->raw_uri = strdup(uri);
	if (req && !req->raw_uri) {
		free(req);
		req = NULL;
	}
	return req;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct http_server *srv = cls;
	struct http_request *req = *con_cls;
	/* an upgraded connection now belongs to the WebSocket relay */
	bool upgraded = req && req->status == MHD_HTTP_SWITCHING_PROTOCOLS;
	(void)toe;
	request_free(req);
	*con_cls = NULL;
	if (upgraded)
		return; /* its forwarded client stays counted while it is open */
	guard_release_client(conn);
	/* A kept-alive connection may idle (libmicrohttpd's connection timeout)
	 * and then must send its next head in time. */
	guard_set_deadline(conn, deadline_in((long long)srv->app->cfg->connection_timeout_s +
					     srv->app->cfg->request_header_timeout_s));
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct http_server *srv = cls;
	const struct labd_config *cfg = srv->app->cfg;

	if (code == MHD_CONNECTION_NOTIFY_STARTED)
		guard_open(conn, socket_context, cfg, deadline_in(cfg->request_header_timeout_s));
	else
		guard_close(socket_context);
}

/* libmicrohttpd's decoder turns "%00" into a NUL that would silently cut the
 * path short ("a.css%00.html" -> "a.css"); turn decoded NULs into a control
 * character instead, which no route or file name accepts. */
static size_t unescape_without_nul(void *cls, struct MHD_Connection *conn, char *uri)
{
	size_t len = MHD_http_unescape(uri);
	(void)cls;
	(void)conn;
	for (size_t i = 0; i < len; i++)
		if (uri[i] == '\0')
			uri[i] = '\x01';
	return len;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	log_debug("http: %s", msg);
}

struct workers *http_start(struct app *app, int listen_fd, const struct http_handler *handlers,
			   size_t n_handlers)
{
	/* one server per process: the web process starts it once */
	static struct http_server srv;
	unsigned threads = app->cfg->threads, limit;
	struct MHD_Daemon **daemons;
	struct workers *w;

	srv = (struct http_server){app, handlers, n_handlers};
	if (threads == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		threads = n > 0 ? (unsigned)n : 1;
	}
	limit = (app->cfg->max_connections + threads - 1) / threads;
	if (!(daemons = calloc(threads, sizeof(*daemons))))
		return NULL;
	/* libmicrohttpd keeps a connection's request head, its parsed headers and
	 * the reply head in one pool, and zeroes the whole pool before every
	 * kept-alive request: its size is paid on each request (64 KiB cost ~1 us
	 * more per proxied request than 32 KiB). 32 KiB takes heads with ~12 KB of
	 * cookies or ~30 KB of other headers; larger ones are answered 431 (nginx's
	 * default refuses any header line over 8 KB). */
	/* One daemon per worker thread, each driven by the worker's own epoll
	 * loop (workers.c), which accepts for it and parks its proxied
	 * connections on their upstream sockets. TURBO: libmicrohttpd reads and
	 * writes a socket before asking epoll whether it is ready (~7% less
	 * CPU per proxied request). */
	for (unsigned i = 0; i < threads; i++) {
		daemons[i] = MHD_start_daemon(
			MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG |
				MHD_USE_TURBO | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE,
			0, NULL, NULL, on_request, &srv, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
			MHD_OPTION_CONNECTION_LIMIT, limit,
			MHD_OPTION_CONNECTION_TIMEOUT, app->cfg->connection_timeout_s,
			MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONNECTION_POOL_BYTES,
			MHD_OPTION_NOTIFY_COMPLETED, on_completed, &srv,
			MHD_OPTION_NOTIFY_CONNECTION, on_connection, &srv, MHD_OPTION_URI_LOG_CALLBACK,
			on_uri, NULL, MHD_OPTION_UNESCAPE_CALLBACK, unescape_without_nul, NULL,
			MHD_OPTION_END);
		if (!daemons[i]) {
			while (i > 0)
				MHD_stop_daemon(daemons[--i]);
			free(daemons);
			return NULL;
		}
	}
	w = workers_start(daemons, threads, listen_fd);
	free(daemons);
	return w;
}
