/* stream.c - responses written by any thread (Server-Sent Events); see stream.h. */
#include "http/stream.h"
#include "http/workers.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http/http.h"
#include "labd/buf.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "labd/parse.h"

/* libmicrohttpd's hint for how much to ask the reader for at once. */
#define READ_BLOCK_BYTES (16 * 1024)
/* A full hub asks clients to come back after this long. */
#define RETRY_AFTER_S "10"
/* The kernel's send buffer of a stream's socket (it doubles the value). An
 * event stream is low-rate, and autotuning would let a stalled client hold
 * megabytes of kernel memory on top of the stream's own bounded buffer. */
#define SOCKET_SNDBUF_BYTES (16 * 1024)

struct http_stream {
	pthread_mutex_t lock; /* guards everything below but the hub links */
	unsigned refs;
	struct buf out; /* written, not yet handed to libmicrohttpd */
	struct MHD_Connection *conn;
	bool suspended; /* by the reader, so exactly one resume is owed */
	bool closed;    /* no more writes; end once out is sent */
	bool failed;    /* end at once, with an error */
	int fd;         /* the client socket (libmicrohttpd's), or -1 */
	void (*on_close)(void *ctx);
	void *on_close_ctx;
	/* the hub's, under its lock */
	struct http_streams *hub;
	uint64_t serial; /* names the stream in the hub's epoll set */
	bool watched;    /* fd is in the hub's epoll set */
	struct http_stream *prev, *next;
};

struct http_streams {
	pthread_mutex_t lock;
	struct http_stream *head;
	size_t n, max_streams;
	uint64_t last_serial;
	unsigned keepalive_ms;
	bool stopping;
	int epfd, stopfd;
	pthread_t thread;
};

/* ---- one stream ---- */

/* With s->lock held: resumes the connection if the reader parked it. The
 * connection stays suspended until this call, so it cannot be gone. */
static void wake_locked(struct http_stream *s)
{
	if (!s->suspended)
		return;
	s->suspended = false;
	workers_resume(s->conn);
}

/* With s->lock held, before the release: ends the stream; failed: at once,
 * with an error. A failed stream's socket is shut down as well, since a
 * stalled client's connection waits to become writable and would not see
 * the reader's error before libmicrohttpd's timeout; the shutdown wakes
 * libmicrohttpd now (the fd stays open: closing it is libmicrohttpd's). */
static void end_locked(struct http_stream *s, bool failed)
{
	if (s->closed && (!failed || s->failed))
		return;
	s->closed = true;
	if (failed && !s->failed) {
		s->failed = true;
		if (s->fd >= 0)
			shutdown(s->fd, SHUT_RDWR);
	}
	wake_locked(s);
}

void http_stream_ref(struct http_stream *s)
{
	pthread_mutex_lock(&s->lock);
	s->refs++;
	pthread_mutex_unlock(&s->lock);
}

void http_stream_unref(struct http_stream *s)
{
	bool last;

	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	last = --s->refs == 0;
	pthread_mutex_unlock(&s->lock);
	if (!last)
		return;
	buf_release(&s->out);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* libmicrohttpd's content reader: hands out what was written; with nothing
 * to give, parks the connection (returning 0 unparked would make the worker
 * call again at once, a busy loop) until a write, close or hang-up. */
static ssize_t read_cb(void *cls, uint64_t pos, char *out, size_t max)
{
	struct http_stream *s = cls;
	ssize_t rc;
	(void)pos;

	pthread_mutex_lock(&s->lock);
	if (s->failed) {
		rc = MHD_CONTENT_READER_END_WITH_ERROR;
	} else if (s->out.len > 0) {
		size_t n = s->out.len < max ? s->out.len : max;
		memcpy(out, s->out.data, n);
		buf_drop(&s->out, n);
		rc = (ssize_t)n;
	} else if (s->closed) {
		rc = MHD_CONTENT_READER_END_OF_STREAM;
	} else {
		/* Suspend under the lock: a writer that sees suspended resumes a
		 * connection that really is suspended, and exactly once. */
		MHD_suspend_connection(s->conn);
		s->suspended = true;
		rc = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* libmicrohttpd let go of the response: the request is over for good. Runs
 * before it closes the socket, so the fd is still ours to unwatch. */
static void release_cb(void *cls)
{
	struct http_stream *s = cls;
	struct http_streams *hub = s->hub;
	void (*on_close)(void *ctx);
	void *ctx;
	int fd;

	pthread_mutex_lock(&s->lock);
	fd = s->fd;
	s->closed = true;
	s->suspended = false; /* a released connection is not ours to resume */
	s->fd = -1;           /* nor its socket ours to shut down */
	on_close = s->on_close;
	ctx = s->on_close_ctx;
	s->on_close = NULL;
	pthread_mutex_unlock(&s->lock);

	pthread_mutex_lock(&hub->lock);
	if (s->prev)
		s->prev->next = s->next;
	else
		hub->head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	hub->n--;
	if (s->watched)
		epoll_ctl(hub->epfd, EPOLL_CTL_DEL, fd, NULL);
	pthread_mutex_unlock(&hub->lock);

	if (on_close)
		on_close(ctx);
	http_stream_unref(s);
}

/* With s->lock held, after an append to s->out (all or nothing) that
 * returned rc: wakes the reader, or ends a stream whose client fell too far
 * behind. */
static int appended_locked(struct http_stream *s, int rc)
{
	if (rc == 0) {
		wake_locked(s);
	} else if (rc == -EMSGSIZE || rc == -ENOMEM) {
		log_warn("http: closing an event stream: its client is %zu bytes behind",
			 s->out.len);
		end_locked(s, true);
	}
	return rc;
}

int http_stream_write(struct http_stream *s, const void *data, size_t len)
{
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = s->closed ? -EPIPE : appended_locked(s, buf_add(&s->out, data, len));
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int http_stream_frame_event(struct buf *out, const char *event, const char *data, uint64_t id)
{
	size_t start = out->len;
	int rc = 0;

	if (event && strpbrk(event, "\r\n"))
		return -EINVAL;
	if (id && (rc = buf_addf(out, "id: %" PRIu64 "\n", id)) < 0)
		goto out;
	if (event && (rc = buf_addf(out, "event: %s\n", event)) < 0)
		goto out;
	for (const char *p = data ? data : "";;) {
		size_t n = strcspn(p, "\r\n");
		if ((rc = buf_add(out, "data: ", 6)) < 0 || (rc = buf_add(out, p, n)) < 0 ||
		    (rc = buf_add(out, "\n", 1)) < 0)
			goto out;
		p += n;
		if (*p == '\0')
			break;
		p += p[0] == '\r' && p[1] == '\n' ? 2 : 1;
	}
	rc = buf_add(out, "\n", 1);
out:
	if (rc < 0 && out->data) {
		out->len = start;
		out->data[start] = '\0';
	}
	return rc;
}

/* Events and comments are framed straight into the stream's buffer (which
 * the framing leaves as it was on failure): no allocation per event or ping,
 * and a client never gets half of one. */
int http_stream_event(struct http_stream *s, const char *event, const char *data, uint64_t id)
{
	int rc;

	if (event && strpbrk(event, "\r\n"))
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	rc = s->closed ? -EPIPE
		       : appended_locked(s, http_stream_frame_event(&s->out, event, data, id));
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int http_stream_comment(struct http_stream *s, const char *text)
{
	int rc;

	if (strpbrk(text, "\r\n"))
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	rc = s->closed ? -EPIPE : appended_locked(s, buf_addf(&s->out, ": %s\n\n", text));
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void http_stream_close(struct http_stream *s)
{
	pthread_mutex_lock(&s->lock);
	end_locked(s, false);
	pthread_mutex_unlock(&s->lock);
}

size_t http_stream_held_bytes(struct http_stream *s)
{
	size_t n;

	pthread_mutex_lock(&s->lock);
	n = s->out.len;
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* The client socket, watched for a hang-up (one-shot: one is enough). */
static int client_fd(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

/* Why a stream could not be opened. */
enum open_result { OPEN_OK, OPEN_STOPPING, OPEN_FULL, OPEN_NO_MEMORY };

/* With hub->lock held: a new stream for conn, linked into the hub, its
 * response in *resp. */
static enum open_result open_locked(struct http_streams *hub, struct MHD_Connection *conn,
				    const char *content_type, size_t max_bytes,
				    struct http_stream **out, struct MHD_Response **resp)
{
	struct http_stream *s;
	struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLONESHOT};

	if (hub->stopping)
		return OPEN_STOPPING;
	if (hub->n >= hub->max_streams)
		return OPEN_FULL;
	if (!(s = calloc(1, sizeof(*s))))
		return OPEN_NO_MEMORY;
	pthread_mutex_init(&s->lock, NULL);
	s->refs = 2; /* the response's and the caller's */
	buf_init(&s->out, max_bytes);
	s->conn = conn;
	s->hub = hub;
	s->serial = ++hub->last_serial;
	*resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, READ_BLOCK_BYTES, read_cb, s,
						  release_cb);
	if (!*resp) {
		pthread_mutex_destroy(&s->lock);
		free(s);
		return OPEN_NO_MEMORY;
	}
	MHD_add_response_header(*resp, "Content-Type", content_type);
	MHD_add_response_header(*resp, "Cache-Control", "no-store");
	MHD_add_response_header(*resp, "X-Accel-Buffering", "no");
	s->next = hub->head;
	if (hub->head)
		hub->head->prev = s;
	hub->head = s;
	hub->n++;
	s->fd = client_fd(conn);
	if (s->fd >= 0 &&
	    setsockopt(s->fd, SOL_SOCKET, SO_SNDBUF, &(int){SOCKET_SNDBUF_BYTES}, sizeof(int)) < 0)
		log_errno("http: event stream socket %d: SO_SNDBUF", s->fd);
	ev.data.u64 = s->serial;
	s->watched = s->fd >= 0 && epoll_ctl(hub->epfd, EPOLL_CTL_ADD, s->fd, &ev) == 0;
	if (s->fd >= 0 && !s->watched) /* a hang-up is then found at the next ping */
		log_errno("http: watch event stream socket %d", s->fd);
	*out = s;
	return OPEN_OK;
}

struct http_stream *http_stream_open(struct http_request *req, struct http_streams *hub,
				     const char *content_type, size_t max_bytes,
				     void (*on_close)(void *ctx), void *ctx)
{
	struct http_stream *s = NULL;
	struct MHD_Response *resp = NULL;
	enum open_result res;
	size_t n;

	pthread_mutex_lock(&hub->lock);
	res = open_locked(hub, http_connection(req), content_type, max_bytes, &s, &resp);
	n = hub->n;
	if (res == OPEN_OK) {
		s->on_close = on_close;
		s->on_close_ctx = ctx;
	}
	pthread_mutex_unlock(&hub->lock);
	/* Replies only now: replacing a reply may release a stream, which
	 * takes the hub's lock. */
	switch (res) {
	case OPEN_OK:
		/* The response owns its reference from here: replacing the reply
		 * releases it through release_cb like any other end. */
		http_reply_response(req, MHD_HTTP_OK, resp);
		return s;
	case OPEN_STOPPING:
		http_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, "shutting_down",
				 "the server is shutting down");
		break;
	case OPEN_FULL:
		http_add_header(req, "Retry-After", RETRY_AFTER_S);
		http_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, "too_many_streams",
				 "the server has %zu event streams open; try again later", n);
		break;
	case OPEN_NO_MEMORY:
		http_reply_internal(req);
		break;
	}
	return NULL;
}

/* ---- the hub ---- */

size_t http_streams_count(struct http_streams *hub)
{
	size_t n;

	pthread_mutex_lock(&hub->lock);
	n = hub->n;
	pthread_mutex_unlock(&hub->lock);
	return n;
}

/* A client socket hung up: end its stream at once (the reader then fails
 * the response and libmicrohttpd closes the connection). */
static void hung_up(struct http_streams *hub, uint64_t serial)
{
	pthread_mutex_lock(&hub->lock);
	for (struct http_stream *s = hub->head; s; s = s->next) {
		if (s->serial != serial)
			continue;
		pthread_mutex_lock(&s->lock);
		end_locked(s, true);
		pthread_mutex_unlock(&s->lock);
		break;
	}
	pthread_mutex_unlock(&hub->lock);
}

static void ping_all(struct http_streams *hub)
{
	pthread_mutex_lock(&hub->lock);
	for (struct http_stream *s = hub->head; s; s = s->next)
		http_stream_comment(s, "ping");
	pthread_mutex_unlock(&hub->lock);
}

static void *hub_loop(void *arg)
{
	struct http_streams *hub = arg;
	struct epoll_event events[32];
	int64_t next_ping = clock_ms() + hub->keepalive_ms;

	for (;;) {
		int64_t wait = next_ping - clock_ms();
		int n = epoll_wait(hub->epfd, events, 32, wait > 0 ? (int)wait : 0);
		if (n < 0 && errno != EINTR) {
			log_errno("http: event streams: epoll_wait");
			return NULL;
		}
		for (int i = 0; i < n; i++) {
			if (events[i].data.u64 == 0)
				return NULL; /* the stop eventfd */
			hung_up(hub, events[i].data.u64);
		}
		if (clock_ms() >= next_ping) {
			ping_all(hub);
			next_ping = clock_ms() + hub->keepalive_ms;
		}
	}
}

struct http_streams *http_streams_new(unsigned keepalive_ms, size_t max_streams)
{
	struct http_streams *hub = calloc(1, sizeof(*hub));
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};

	if (!hub) {
		log_errno("http: event streams: calloc");
		return NULL;
	}
	pthread_mutex_init(&hub->lock, NULL);
	hub->keepalive_ms = keepalive_ms ? keepalive_ms : 1;
	hub->max_streams = max_streams;
	hub->epfd = epoll_create1(EPOLL_CLOEXEC);
	hub->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (hub->epfd < 0 || hub->stopfd < 0 ||
	    epoll_ctl(hub->epfd, EPOLL_CTL_ADD, hub->stopfd, &ev) < 0 ||
	    pthread_create(&hub->thread, NULL, hub_loop, hub) != 0) {
		log_errno("http: event streams: start");
		if (hub->epfd >= 0)
			close(hub->epfd);
		if (hub->stopfd >= 0)
			close(hub->stopfd);
		pthread_mutex_destroy(&hub->lock);
		free(hub);
		return NULL;
	}
	return hub;
}

void http_streams_close_all(struct http_streams *hub)
{
	uint64_t one = 1;

	if (!hub)
		return;
	pthread_mutex_lock(&hub->lock);
	if (hub->stopping) {
		pthread_mutex_unlock(&hub->lock);
		return;
	}
	hub->stopping = true;
	for (struct http_stream *s = hub->head; s; s = s->next)
		http_stream_close(s);
	pthread_mutex_unlock(&hub->lock);
	if (write(hub->stopfd, &one, sizeof(one)) < 0)
		log_errno("http: event streams: signal stop");
	pthread_join(hub->thread, NULL);
}

void http_streams_free(struct http_streams *hub)
{
	if (!hub)
		return;
	http_streams_close_all(hub);
	if (hub->n)
		log_warn("http: %zu event streams still open at exit", hub->n);
	close(hub->stopfd);
	close(hub->epfd);
	pthread_mutex_destroy(&hub->lock);
	free(hub);
}

uint64_t http_stream_first_id(struct http_request *req)
{
	const char *last = http_header(req, "Last-Event-ID");
	uint64_t id;

	return last && parse_uint(last, 0, UINT64_MAX - 1, &id) == 0 ? id + 1 : 1;
}
