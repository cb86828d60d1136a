/* proxy.c - see proxy.h. Upstream I/O is non-blocking; whenever it would
 * block, the client connection is parked on the upstream socket
 * (workers_park) and the worker thread moves on to other connections. */
#include "proxy/proxy.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config/config.h"
#include "http/http.h"
#include "labd/app.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "labd/str.h"
#include "metrics/labd.h"
#include "metrics/metrics.h"
#include "proxy/inflight.h"
#include "proxy/resphead.h"
#include "proxy/scrub.h"
#include "auth/handoff.h"
#include "store/sessions.h"
#include "http/workers.h"
#include "proxy/wsrelay.h"

#define HEAD_MAX (64 * 1024)  /* request or response head */
#define IO_CHUNK (64 * 1024)  /* one upstream read */
#define SPARE_STATES 32       /* released states kept per thread for the next requests */

struct proxy_state {
	const struct proxy_context *ctx;
	struct proxy_target target;
	struct MHD_Connection *conn;
	int fd;
	bool reused;
	/* upstream-bound bytes not yet written (the head, chunk framing) */
	char *out;
	size_t out_len, out_off;
	size_t head_len; /* the request head stays at out[0..head_len) for a retry */
	bool chunked_upload, has_body, upload_finished, websocket, head_request;
	size_t chunk_left; /* bytes of the current upload chunk not yet sent */
	/* the response */
	http_parser parser;
	char *in;       /* last read from upstream */
	size_t in_len, in_off;
	struct resphead head; /* its headers */
	bool headers_done, message_done, failed, scrubbing;
	char *body; /* parsed body bytes not yet given to MHD */
	size_t body_len, body_off;
	struct scrub scrub;
	/* deadlines (see park): connect, response head, progress */
	const struct labd_config *cfg;
	long long begun_ms, head_deadline_ms, last_progress_ms;
	int64_t begun_us; /* for the latency metric: finer than clock_ms */
	bool sent_any;  /* a byte went upstream: the connection is up */
	bool given_a_turn; /* request sent, answer awaited without a park (workers_arm) */
	bool timed_out; /* a deadline passed */
	bool counted;   /* holds one of the owner's proxied-request slots */
	struct wsrelay_who who; /* who it is for: account events cancel by it */
	_Atomic bool cancelled;  /* an account event took its access away */
	bool registered;         /* in the in-flight list */
	struct proxy_state *prev, *next;
};

/* Every proxied request in flight, so an account event (a disabled or
 * deleted user, a logout, a revoked token) can end them at once; the lock is
 * taken once at the start and once at the end of each request. */
static pthread_mutex_t inflight_lock = PTHREAD_MUTEX_INITIALIZER;
static struct proxy_state *inflight;

static void inflight_add(struct proxy_state *p)
{
	pthread_mutex_lock(&inflight_lock);
	p->prev = NULL;
	p->next = inflight;
	if (inflight)
		inflight->prev = p;
	inflight = p;
	p->registered = true;
	pthread_mutex_unlock(&inflight_lock);
}

static void inflight_remove(struct proxy_state *p)
{
	if (!p->registered)
		return;
	pthread_mutex_lock(&inflight_lock);
	if (p->prev)
		p->prev->next = p->next;
	else
		inflight = p->next;
	if (p->next)
		p->next->prev = p->prev;
	p->registered = false;
	pthread_mutex_unlock(&inflight_lock);
}

int proxy_cancel(enum wsrelay_scope scope, int64_t id)
{
	int n = 0;

	if (id <= 0)
		return 0;
	pthread_mutex_lock(&inflight_lock);
	for (struct proxy_state *p = inflight; p; p = p->next)
		if (wsrelay_who_matches(&p->who, scope, id, NULL)) {
			atomic_store(&p->cancelled, true);
			n++;
		}
	pthread_mutex_unlock(&inflight_lock);
	if (n)
		workers_sweep_all(); /* the parked ones wake now, not at their deadline */
	return n;
}

static const char *const hop_headers[] = {
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "TE", "Trailer", "Transfer-Encoding", "Upgrade",
};

bool proxy_is_hop_header(const char *name)
{
	/* Every name above starts with one of these letters: most headers are
	 * settled without a string comparison. */
	if (!strchr("ckptu", name[0] | 0x20) || !name[0])
		return false;
	for (size_t i = 0; i < sizeof(hop_headers) / sizeof(hop_headers[0]); i++)
		if (strcasecmp(name, hop_headers[i]) == 0)
			return true;
	return false;
}

/* Whether the cookie pair p[0..len) is called name, read as leniently as a
 * Python server reads it (the name stripped of blanks): what Jupyter would
 * take for labd's cookie is labd's cookie. */
static bool cookie_named(const char *p, size_t len, const char *name)
{
	const char *eq = memchr(p, '=', len), *end = eq;

	if (!eq)
		return false;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	return (size_t)(end - p) == strlen(name) && strncmp(p, name, (size_t)(end - p)) == 0;
}

void proxy_strip_cookie(const char *value, const char *name, char *out, size_t outlen)
{
	size_t used = 0;

	out[0] = '\0';
	for (const char *p = value; *p;) {
		while (*p == ' ' || *p == ';')
			p++;
		const char *end = strchr(p, ';');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		bool ours = cookie_named(p, len, name);
		if (len && !ours && used + len + 3 < outlen) {
			used += (size_t)snprintf(out + used, outlen - used, "%s%.*s", used ? "; " : "",
						 (int)len, p);
		}
		p += len;
	}
}

/* True when the comma-separated header value lists token (case-insensitive). */
static bool header_has_token(const char *value, const char *token)
{
	size_t tlen = strlen(token);

	for (const char *p = value; p && *p;) {
		while (*p == ' ' || *p == ',')
			p++;
		size_t len = strcspn(p, ", ");
		if (len == tlen && strncasecmp(p, token, tlen) == 0)
			return true;
		p += len;
	}
	return false;
}

static int append_out(struct proxy_state *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int append_out(struct proxy_state *p, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(p->out + p->out_len, HEAD_MAX - p->out_len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= HEAD_MAX - p->out_len)
		return -1;
	p->out_len += (size_t)n;
	return 0;
}

/* Appends the pieces, a NULL after the last (the request path's appends,
 * without printf); -1 when the head would outgrow HEAD_MAX. */
static int append_raw(struct proxy_state *p, ...) __attribute__((sentinel));
static int append_raw(struct proxy_state *p, ...)
{
	va_list ap;
	const char *s;
	size_t len = p->out_len;

	va_start(ap, p);
	while ((s = va_arg(ap, const char *))) {
		size_t n = strlen(s);
		if (n >= HEAD_MAX - len) {
			va_end(ap);
			return -1;
		}
		memcpy(p->out + len, s, n);
		len += n;
	}
	va_end(ap);
	p->out_len = len;
	return 0;
}

/* Appends "name: value\r\n". */
static int append_header(struct proxy_state *p, const char *name, const char *value)
{
	return append_raw(p, name, ": ", value, "\r\n", NULL);
}

struct head_ctx {
	struct proxy_state *p;
	const char *connection; /* client's Connection header: tokens name more hop headers */
	int failed;
};

static enum MHD_Result copy_request_header(void *cls, enum MHD_ValueKind kind, const char *key,
					   const char *value)
{
	struct head_ctx *h = cls;
	char cookies[4096], rest[4096];
	(void)kind;

	if (proxy_is_hop_header(key) || header_has_token(h->connection, key) ||
	    !strcasecmp(key, "Host") || !strcasecmp(key, "Authorization") ||
	    !strcasecmp(key, "Content-Length") || !strcasecmp(key, "Expect") ||
	    !strncasecmp(key, "X-Forwarded-", 12))
		return MHD_YES;
	if (!strcasecmp(key, "Cookie")) {
		/* labd's own cookies never reach the runtime (either name of each) */
		proxy_strip_cookie(value, SESSION_COOKIE_NAME, rest, sizeof(rest));
		proxy_strip_cookie(rest, RUNTIME_COOKIE_NAME, cookies, sizeof(cookies));
		proxy_strip_cookie(cookies, "__Host-" SESSION_COOKIE_NAME, rest, sizeof(rest));
		proxy_strip_cookie(rest, "__Host-" RUNTIME_COOKIE_NAME, cookies, sizeof(cookies));
		if (cookies[0] && append_header(h->p, "Cookie", cookies) < 0)
			h->failed = 1;
		return MHD_YES;
	}
	if (append_header(h->p, key, value) < 0)
		h->failed = 1;
	return MHD_YES;
}

/* Builds the upstream request head from the client's request. */
static int build_head(struct proxy_state *p, struct http_request *req)
{
	const char *host = http_header(req, "Host");
	const char *cl = http_header(req, "Content-Length");
	const char *te = http_header(req, "Transfer-Encoding");
	const char *upgrade = http_header(req, "Upgrade");
	struct head_ctx h = {p, http_header(req, "Connection"), 0};

	p->websocket = upgrade && http_method_is(req, "GET") && !strcasecmp(upgrade, "websocket");
	p->chunked_upload = !cl && te && header_has_token(te, "chunked");
	p->has_body = cl ? strcmp(cl, "0") != 0 : p->chunked_upload;
	if (append_raw(p, http_method(req), " ", http_raw_uri(req), " HTTP/1.1\r\nHost: ",
		       host ? host : "localhost", "\r\n", NULL) < 0)
		return -1;
	MHD_get_connection_values(http_connection(req), MHD_HEADER_KIND, copy_request_header, &h);
	if (h.failed || append_raw(p, "Authorization: token ", p->target.token, "\r\n", NULL) < 0 ||
	    append_header(p, "X-Forwarded-For", http_address(req)) < 0 ||
	    append_header(p, "X-Forwarded-Proto", p->ctx->secure ? "https" : "http") < 0 ||
	    append_header(p, "X-Forwarded-Host", host ? host : "") < 0)
		return -1;
	if (cl && append_header(p, "Content-Length", cl) < 0)
		return -1;
	if (p->chunked_upload && append_out(p, "Transfer-Encoding: chunked\r\n") < 0)
		return -1;
	if (p->websocket)
		return append_raw(p, "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n", NULL);
	return append_raw(p, "Connection: keep-alive\r\n\r\n", NULL);
}

/* Writes pending bytes; 1 = all written, 0 = would block, -1 = error. */
static int flush_out(struct proxy_state *p)
{
	while (p->out_off < p->out_len) {
		ssize_t n = send(p->fd, p->out + p->out_off, p->out_len - p->out_off, MSG_NOSIGNAL);
		if (n > 0) {
			p->out_off += (size_t)n;
			p->sent_any = true;
			p->last_progress_ms = clock_ms();
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			return 0;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else {
			return -1;
		}
	}
	p->out_off = p->out_len = 0;
	return 1;
}

static void reply_bad_gateway(struct http_request *req, const char *why)
{
	log_warn("proxy %s %s: %s", http_method(req), http_path(req), why);
	http_reply_error(req, MHD_HTTP_BAD_GATEWAY, "runtime_unreachable",
			 "your runtime did not answer (%s); it may be starting or stopping", why);
}

/* One allocation for the state and its four buffers (none zeroed: each is
 * written before it is read). Released ones are kept per thread, as many as
 * were in flight at once up to SPARE_STATES: at a quarter megabyte each, a
 * malloc and free per request made the allocator return the memory to the
 * kernel and fault it back in (with connections packed onto one worker, 4
 * spares left 4% of its CPU in page faults under 32 connections). A worker
 * so keeps at most 8 MiB it once used; the spares live as long as their
 * thread (the worker threads, until the process ends). */
#define STATE_BYTES \
	(sizeof(struct proxy_state) + HEAD_MAX + RESPHEAD_MAX + 2 * IO_CHUNK + SCRUB_NEEDLE_MAX)
static _Thread_local struct proxy_state *spare_states[SPARE_STATES];
static _Thread_local unsigned spare_count;

static struct proxy_state *state_new(void)
{
	return spare_count ? spare_states[--spare_count] : malloc(STATE_BYTES);
}

static void state_free(struct proxy_state *p)
{
	if (spare_count < SPARE_STATES)
		spare_states[spare_count++] = p;
	else
		free(p);
}

/* Who a WebSocket of this request belongs to, so that account events (a
 * logout, a revoked token, a disabled user) can close it. */
static void fill_who(struct wsrelay_who *who, const struct auth_identity *id,
		     const struct proxy_target *target)
{
	memset(who, 0, sizeof(*who));
	str_copy(who->owner, sizeof(who->owner), target->owner);
	who->owner_id = target->owner_id;
	who->user_id = id->kind != AUTH_NONE ? id->user.id : 0;
	/* a runtime cookie lives as long as the login session that was handed it */
	who->session_id = id->kind == AUTH_COOKIE || id->kind == AUTH_RUNTIME ? id->session_id : 0;
	who->token_id = id->kind == AUTH_TOKEN ? id->token_id : 0;
}

/* The per-user caps: requests in flight to one runtime, open WebSockets. */
static bool within_caps(struct http_request *req, const struct proxy_context *ctx,
			const struct proxy_state *p)
{
	const struct labd_config *cfg = http_app(req)->cfg;
	const char *owner = p->target.owner;

	if (p->websocket && wsrelay_count(ctx->relay, owner) >= (int)cfg->max_websockets_per_user) {
		http_reply_error(req, MHD_HTTP_TOO_MANY_REQUESTS, "too_many_websockets",
				 "%s already has %u WebSockets open to the runtime (max_websockets_per_user)",
				 owner, cfg->max_websockets_per_user);
		return false;
	}
	if (inflight_acquire(owner, cfg->max_requests_per_user) < 0) {
		http_reply_error(req, MHD_HTTP_TOO_MANY_REQUESTS, "too_many_requests",
				 "%s already has %u requests in flight to the runtime (max_requests_per_user)",
				 owner, cfg->max_requests_per_user);
		return false;
	}
	return true;
}

int proxy_begin(struct http_request *req, const struct proxy_context *ctx,
		const struct proxy_target *target)
{
	struct proxy_state *p = state_new();

	if (!p) {
		http_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, "overloaded", "out of memory");
		return -1;
	}
	memset(p, 0, sizeof(*p));
	p->out = (char *)(p + 1);
	resphead_init(&p->head, p->out + HEAD_MAX);
	p->in = p->head.buf + RESPHEAD_MAX;
	p->body = p->in + IO_CHUNK;
	p->ctx = ctx;
	p->target = *target;
	p->conn = http_connection(req);
	p->cfg = http_app(req)->cfg;
	p->begun_ms = p->last_progress_ms = clock_ms();
	p->begun_us = metrics_now_us();
	fill_who(&p->who, http_identity(req), target);
	p->head_request = http_method_is(req, "HEAD");
	http_set_stream_state(req, p);
	p->fd = -1;
	if (build_head(p, req) < 0) {
		http_reply_error(req, 431, "headers_too_large", "request headers too large");
		return -1;
	}
	if (!within_caps(req, ctx, p))
		return -1;
	p->counted = true;
	inflight_add(p);
	/* A body-less request is resent if a pooled connection turns out
	 * stale (retry_fresh), so only one with a body pays for a probe. */
	p->fd = upstream_get(target->socket_path, target->peer_uid, p->has_body, &p->reused);
	if (p->fd < 0 || (!p->reused && workers_watch(p->fd) < 0)) {
		reply_bad_gateway(req, "cannot connect to its socket");
		return -1;
	}
	p->head_len = p->out_len;
	scrub_init(&p->scrub, target->token);
	return 0;
}

/* The deadline of the phase the exchange is in: the connection must come up
 * within connect_timeout, the response head arrive within header_timeout of
 * the request's end, and while a body moves no side may stall for
 * idle_timeout. A runtime that accepts and never answers, or trickles its
 * head, thus frees the client's connection slot on time. */
static long long phase_deadline_ms(const struct proxy_state *p)
{
	if (!p->sent_any)
		return p->begun_ms + p->cfg->upstream_connect_timeout_s * 1000;
	if (p->upload_finished && !p->headers_done)
		return p->head_deadline_ms;
	return p->last_progress_ms + p->cfg->upstream_idle_timeout_s * 1000;
}

/* Parks the connection until fd is ready or the phase's deadline passes
 * (workers.c resumes it then); on failure marks the exchange failed. */
static bool park(struct proxy_state *p, uint32_t events)
{
	long long deadline = phase_deadline_ms(p);

	if (atomic_load(&p->cancelled)) {
		p->failed = true;
		return false;
	}
	if (clock_ms() >= deadline) {
		log_warn("proxy: %s timed out (%s)", p->target.socket_path,
			 !p->sent_any ? "connect" : p->headers_done ? "no progress" : "no response head");
		p->timed_out = p->failed = true;
		return false;
	}
	if (workers_park(p->conn, p->fd, events, deadline, &p->cancelled) < 0) {
		p->failed = true;
		return false;
	}
	return true;
}

/* The reply for an exchange that failed before the response head. */
static void reply_failed(struct http_request *req, struct proxy_state *p, const char *why)
{
	if (atomic_load(&p->cancelled)) {
		http_reply_error(req, MHD_HTTP_FORBIDDEN, "access_ended",
				 "this request's access ended (logged out, disabled or revoked)");
		return;
	}
	if (!p->timed_out) {
		reply_bad_gateway(req, why);
		return;
	}
	http_reply_error(req, MHD_HTTP_GATEWAY_TIMEOUT, "runtime_timeout",
			 "your runtime did not answer in time; it may be overloaded or stuck");
}

enum MHD_Result proxy_upload(struct http_request *req, const char *data, size_t *size)
{
	struct proxy_state *p = http_stream_state(req);
	int rc;

	/* Pending head or framing first; while upstream cannot take it, keep the
	 * piece in libmicrohttpd (*size unchanged) and park. */
	if ((rc = flush_out(p)) < 0)
		return MHD_NO;
	if (rc == 0)
		return park(p, EPOLLOUT) ? MHD_YES : MHD_NO;
	/* libmicrohttpd hands back exactly the unsent rest after a park, so a new
	 * chunk starts only when the previous one went out whole. */
	if (p->chunked_upload && p->chunk_left == 0) {
		if (append_out(p, "%zx\r\n", *size) < 0)
			return MHD_NO;
		p->chunk_left = *size;
		if ((rc = flush_out(p)) < 0)
			return MHD_NO;
		if (rc == 0)
			return park(p, EPOLLOUT) ? MHD_YES : MHD_NO;
	}
	while (*size > 0) {
		ssize_t n = send(p->fd, data, *size, MSG_NOSIGNAL);
		if (n > 0) {
			data += n;
			*size -= (size_t)n;
			p->chunk_left -= p->chunked_upload ? (size_t)n : 0;
			p->sent_any = true;
			p->last_progress_ms = clock_ms();
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return park(p, EPOLLOUT) ? MHD_YES : MHD_NO;
		return MHD_NO;
	}
	if (p->chunked_upload && append_out(p, "\r\n") < 0)
		return MHD_NO;
	return MHD_YES;
}

/* --- the response ------------------------------------------------------- */

static bool content_type_is_text(struct proxy_state *p);

static int on_header_field(http_parser *hp, const char *at, size_t len)
{
	return resphead_field(&((struct proxy_state *)hp->data)->head, at, len);
}

static int on_header_value(http_parser *hp, const char *at, size_t len)
{
	return resphead_value(&((struct proxy_state *)hp->data)->head, at, len);
}

static int on_headers_complete(http_parser *hp)
{
	struct proxy_state *p = hp->data;
	resphead_end(&p->head);
	p->headers_done = true;
	p->scrubbing = content_type_is_text(p);
	/* A HEAD response announces a body it does not send. */
	return p->head_request ? 1 : 0;
}

static int on_body(http_parser *hp, const char *at, size_t len)
{
	struct proxy_state *p = hp->data;
	/* Reads are at most IO_CHUNK and only happen once the body buffer is
	 * drained, so this never overflows; the scrubber adds at most its carry. */
	if (p->scrubbing)
		p->body_len += scrub_feed(&p->scrub, at, len, p->body + p->body_len, false);
	else {
		memcpy(p->body + p->body_len, at, len);
		p->body_len += len;
	}
	return 0;
}

static int on_message_complete(http_parser *hp)
{
	struct proxy_state *p = hp->data;
	if (p->scrubbing)
		p->body_len += scrub_feed(&p->scrub, "", 0, p->body + p->body_len, true);
	p->message_done = true;
	return 0;
}

static const http_parser_settings parser_settings = {
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

/* Feeds unparsed input to the parser; -1 on a protocol error. Stops early at
 * an upgrade (the rest is WebSocket data) or once the body buffer has data. */
static int parse_input(struct proxy_state *p)
{
	size_t n = http_parser_execute(&p->parser, &parser_settings, p->in + p->in_off,
				       p->in_len - p->in_off);
	p->in_off += n;
	if (p->parser.upgrade)
		return 0;
	if (HTTP_PARSER_ERRNO(&p->parser) != HPE_OK) {
		log_warn("proxy: bad response from %s: %s", p->target.socket_path,
			 http_errno_description(HTTP_PARSER_ERRNO(&p->parser)));
		return -1;
	}
	return 0;
}

/* Reads once from upstream into the input buffer and parses it.
 * 1 = progress, 0 = would block, -1 = error or premature EOF. */
static int read_upstream(struct proxy_state *p)
{
	ssize_t n;

	do
		n = recv(p->fd, p->in, IO_CHUNK, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
	p->last_progress_ms = clock_ms();
	p->in_len = (size_t)n;
	p->in_off = 0;
	if (n == 0) {
		/* EOF ends a body delimited by the connection close; anything else
		 * is an upstream that died mid-response. */
		http_parser_execute(&p->parser, &parser_settings, NULL, 0);
		return p->message_done ? 1 : -1;
	}
	return parse_input(p) < 0 ? -1 : 1;
}

static ssize_t read_body(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct proxy_state *p = cls;
	(void)pos;

	if (atomic_load(&p->cancelled)) { /* a download in progress ends too */
		p->failed = true;
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	for (;;) {
		if (p->body_off < p->body_len) {
			size_t n = p->body_len - p->body_off;
			n = n < max ? n : max;
			memcpy(buf, p->body + p->body_off, n);
			p->body_off += n;
			return (ssize_t)n;
		}
		p->body_off = p->body_len = 0;
		if (p->message_done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (p->in_off < p->in_len) {
			if (parse_input(p) < 0)
				break;
			continue;
		}
		int rc = read_upstream(p);
		if (rc < 0)
			break;
		if (rc == 0)
			return park(p, EPOLLIN) ? 0 : MHD_CONTENT_READER_END_WITH_ERROR;
	}
	p->failed = true;
	return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* Copies upstream's end-to-end headers into resp, scrubbing the token. */
static void copy_response_headers(struct proxy_state *p, struct MHD_Response *resp)
{
	const char *connection = resphead_get(&p->head, "Connection"), *name, *val;
	char value[8192];
	size_t off = 0;

	while ((name = resphead_next(&p->head, &off, &val))) {
		/* Hop-by-hop headers and those that libmicrohttpd sets itself; a
		 * WebSocket's Upgrade is the one hop header passed on (MHD adds
		 * "Connection: Upgrade" itself). */
		bool keep_upgrade = p->websocket && !strcasecmp(name, "Upgrade");
		if (!keep_upgrade &&
		    (proxy_is_hop_header(name) || header_has_token(connection, name) ||
		     !strcasecmp(name, "Content-Length") || !strcasecmp(name, "Date") ||
		     !strcasecmp(name, "Server") || scrub_header_dropped(name, val)))
			continue;
		if (strstr(val, p->target.token)) { /* rare: copy only then */
			snprintf(value, sizeof(value), "%s", val);
			scrub_string(p->target.token, value);
			val = value;
		}
		MHD_add_response_header(resp, name, val);
	}
}

static bool content_type_is_text(struct proxy_state *p)
{
	const char *ct = resphead_get(&p->head, "Content-Type");

	return ct && (strncasecmp(ct, "text/", 5) == 0 || strstr(ct, "javascript") ||
		      strstr(ct, "json") || strstr(ct, "xml"));
}

static void on_upgraded(void *cls, struct MHD_Connection *conn, void *con_cls,
			const char *extra_in, size_t extra_in_size, MHD_socket sock,
			struct MHD_UpgradeResponseHandle *urh)
{
	struct http_request *req = cls;
	struct proxy_state *p = http_stream_state(req);
	(void)conn;
	(void)con_cls;

	/* Bytes Jupyter sent after its 101 head are already WebSocket frames. */
	workers_unwatch(p->fd);
	if (wsrelay_add(p->ctx->relay, sock, urh, p->fd, extra_in, extra_in_size,
			p->in + p->in_off, p->in_len - p->in_off, &p->who) == 0)
		log_debug("proxy: websocket relay for %s", p->target.owner);
	p->fd = -1; /* the relay owns it now */
}

/* Builds and sets the reply once the response head is in. */
static void start_response(struct http_request *req, struct proxy_state *p)
{
	struct MHD_Response *resp;
	unsigned status = p->parser.status_code;

	if (p->websocket && status == MHD_HTTP_SWITCHING_PROTOCOLS && p->parser.upgrade) {
		resp = MHD_create_response_for_upgrade(on_upgraded, req);
	} else if (p->message_done) {
		/* The whole (small) body came with the head: sent from the state's
		 * own buffer, which lives until the request completes (a streaming
		 * response's block libmicrohttpd allocates and zeroes per response). */
		resp = MHD_create_response_from_buffer(p->body_len - p->body_off,
						       p->body + p->body_off, MHD_RESPMEM_PERSISTENT);
	} else {
		/* Text bodies may carry the token: scrub them, which changes their
		 * length, so those go out chunked. */
		/* http-parser counts content_length down as it parses, so the total
		 * is what it still expects plus what is buffered. */
		bool known = (p->parser.flags & F_CONTENTLENGTH) && !(p->parser.flags & F_CHUNKED) &&
			     !p->scrubbing;
		uint64_t size = p->message_done ? 0 : p->parser.content_length;
		resp = MHD_create_response_from_callback(known ? size + p->body_len : MHD_SIZE_UNKNOWN,
							 IO_CHUNK, read_body, p, NULL);
	}
	if (!resp) {
		reply_bad_gateway(req, "cannot build the response");
		return;
	}
	copy_response_headers(p, resp);
	http_reply_upstream(req, status, resp);
}

/* A pooled connection that the server closed while idle fails before any
 * response byte: resend a body-less request once, on a pooled connection
 * that passes the probe (the server may have closed several) or a new one. */
static bool retry_fresh(struct proxy_state *p)
{
	bool reused;

	if (!p->reused || p->has_body || p->in_len > 0 || p->parser.nread > 0)
		return false;
	close(p->fd);
	p->fd = upstream_get(p->target.socket_path, p->target.peer_uid, true, &reused);
	p->reused = false; /* never retried twice */
	if (p->fd < 0)
		return false;
	if (!reused && workers_watch(p->fd) < 0) {
		close(p->fd);
		p->fd = -1;
		return false;
	}
	p->out_off = 0;
	p->out_len = p->head_len;
	http_parser_init(&p->parser, HTTP_RESPONSE);
	p->parser.data = p;
	return true;
}

enum MHD_Result proxy_respond(struct http_request *req)
{
	struct proxy_state *p = http_stream_state(req);
	int rc;

	if (p->failed) {
		reply_failed(req, p, "the connection to it broke");
		return MHD_YES;
	}
	if (!p->upload_finished) {
		if (p->chunked_upload && append_out(p, "0\r\n\r\n") < 0)
			return MHD_NO;
		p->upload_finished = true;
		p->head_deadline_ms = clock_ms() + p->cfg->upstream_header_timeout_s * 1000;
		http_parser_init(&p->parser, HTTP_RESPONSE);
		p->parser.data = p;
	}
	bool sending = p->out_off < p->out_len;
	if ((rc = flush_out(p)) < 0 && retry_fresh(p))
		rc = flush_out(p);
	if (rc < 0) {
		reply_bad_gateway(req, "it closed the connection");
		return MHD_YES;
	}
	if (rc == 0 && !park(p, EPOLLOUT)) {
		reply_failed(req, p, "it takes no request");
		return MHD_YES;
	}
	if (rc == 0)
		return MHD_YES;
	/* The request's last bytes went out just now: no answer can be there
	 * yet. Give it one turn of the worker's loop instead of a read that
	 * finds nothing: libmicrohttpd calls this again in its next run, and
	 * under load the answer has come by then, which spares the park and
	 * resume. A pooled connection the server closed shows as a hang-up, and
	 * retry_fresh resends. */
	if (sending && !p->headers_done && p->in_off == p->in_len) {
		workers_arm(p->fd);
		p->given_a_turn = true;
		return MHD_YES;
	}
	if (p->given_a_turn) {
		p->given_a_turn = false;
		if (!workers_fired(p->fd)) {
			if (!park(p, EPOLLIN))
				reply_failed(req, p, "it sent no response");
			return MHD_YES;
		}
	}
	while (!p->headers_done) {
		rc = p->in_off < p->in_len ? (parse_input(p) < 0 ? -1 : 1) : read_upstream(p);
		if (rc < 0 && retry_fresh(p)) {
			rc = 0;
			if (flush_out(p) < 0) {
				reply_bad_gateway(req, "it closed the connection");
				return MHD_YES;
			}
		}
		if (rc < 0) {
			reply_bad_gateway(req, "it sent no valid response");
			return MHD_YES;
		}
		if (rc == 0 && !park(p, EPOLLIN))
			reply_failed(req, p, "it sent no response");
		if (rc == 0)
			return MHD_YES;
	}
	start_response(req, p);
	return MHD_YES;
}

void proxy_release(struct http_request *req)
{
	struct proxy_state *p = http_stream_state(req);

	if (!p)
		return;
	metrics_proxy_request(http_status(req), metrics_now_us() - p->begun_us);
	if (p->counted)
		inflight_release(p->target.owner);
	inflight_remove(p);
	/* Only a connection that finished a whole exchange with nothing left over
	 * and that upstream agreed to keep open is reused. */
	if (p->fd >= 0) {
		if (p->message_done && !p->failed && p->in_off == p->in_len &&
		    http_should_keep_alive(&p->parser) && !p->websocket)
			upstream_put(p->target.socket_path, p->target.peer_uid, p->fd);
		else
			close(p->fd);
	}
	state_free(p);
	http_set_stream_state(req, NULL);
}
