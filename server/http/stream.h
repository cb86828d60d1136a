/* stream.h - a response written by any thread, bit by bit: Server-Sent Events.
 *
 * A handler opens a stream as its request's reply; from then on any thread
 * may write to it through a reference-counted handle. The unsent bytes sit in
 * ONE bounded buffer (struct buf): a client too slow to take them makes the
 * write that would pass the maximum fail with -EMSGSIZE and the stream end,
 * rather than the buffer grow. The bytes reach libmicrohttpd through a
 * content-reader callback; while there are none the connection is suspended
 * (no worker spins on it) and the next write, close or hang-up resumes it.
 *
 * Every open stream belongs to a hub (struct http_streams) whose thread
 *  - writes the comment ": ping" to each stream every keepalive_ms, so that
 *    proxies and idle timeouts do not cut a quiet stream (and a client that
 *    vanished without a FIN is found by the failing send), and
 *  - watches each client socket for a hang-up (EPOLLRDHUP), so a closed
 *    stream is released at once, not at the next ping (a suspended connection
 *    is not watched by libmicrohttpd and never times out by itself).
 *
 * Lifetime: a stream has one reference for libmicrohttpd's response and one
 * for the handler that opened it. When libmicrohttpd lets go of the response
 * (the request is over: the client went away, the stream ended, or the reply
 * was replaced before it was sent) the on_close callback runs once, on that
 * thread, and the response's reference goes; the stream is freed with the
 * last http_stream_unref. Writes after the end fail with -EPIPE.
 *
 * Lock order: hub, then stream, then libmicrohttpd's own; on_close runs with
 * none of them held, so it may unsubscribe from whatever feeds the stream. */
#ifndef LABD_HTTP_STREAM_H
#define LABD_HTTP_STREAM_H

#include <stddef.h>
#include <stdint.h>

struct buf;
struct http_request;
struct http_stream;
struct http_streams;

/* How often a quiet stream gets ": ping" by default. */
#define HTTP_STREAM_KEEPALIVE_MS 15000
/* Unsent bytes one event stream may hold before it is closed as too slow. */
#define HTTP_STREAM_MAX_BYTES (64 * 1024)

/* Starts the hub's thread: pings every keepalive_ms, at most max_streams open
 * at once. NULL on failure (logged). */
struct http_streams *http_streams_new(unsigned keepalive_ms, size_t max_streams);
/* Ends every open stream (each client gets what was written, then the end),
 * refuses new ones and stops the thread. Call before MHD_stop_daemon, which
 * must find no suspended connection. */
void http_streams_close_all(struct http_streams *hub);
/* Frees the hub; after MHD_stop_daemon (which releases the streams). NULL is fine. */
void http_streams_free(struct http_streams *hub);
/* Streams open now. */
size_t http_streams_count(struct http_streams *hub);

/* Makes req's reply a 200 of content_type streamed from the writer, with
 * Cache-Control: no-store and X-Accel-Buffering: no (nginx would buffer it
 * otherwise), holding at most max_bytes unsent. on_close(ctx) runs once when
 * the stream is over (see above); it may be NULL. Returns the writer with one
 * reference for the caller (drop it with http_stream_unref), or NULL with the
 * reply set: 503 too_many_streams (Retry-After) when the hub is full, 503
 * shutting_down, or 500. Call from the request's handler. */
struct http_stream *http_stream_open(struct http_request *req, struct http_streams *hub,
				     const char *content_type, size_t max_bytes,
				     void (*on_close)(void *ctx), void *ctx);
/* Takes one more reference. */
void http_stream_ref(struct http_stream *s);
/* Drops one reference; the last one frees the stream. NULL is fine. */
void http_stream_unref(struct http_stream *s);

/* Appends len bytes, all or none; any thread. 0; -EPIPE when the stream has
 * ended; -EMSGSIZE (or -ENOMEM) when they do not fit: the stream then ends
 * with an error, its client having fallen max_bytes behind. */
int http_stream_write(struct http_stream *s, const void *data, size_t len);
/* The id of a stream's first event: one after the client's Last-Event-ID (a
 * reconnecting EventSource sends it), 1 without one or with a bad one. */
uint64_t http_stream_first_id(struct http_request *req);
/* Writes one Server-Sent Event (http_stream_frame_event). Results as
 * http_stream_write, and -EINVAL for an event name with a line break. */
int http_stream_event(struct http_stream *s, const char *event, const char *data, uint64_t id);
/* Writes the comment ": text" and a blank line (clients ignore it). */
int http_stream_comment(struct http_stream *s, const char *text);
/* Ends the stream once what was written is sent; later writes fail (-EPIPE). */
void http_stream_close(struct http_stream *s);
/* Bytes written and not yet handed to libmicrohttpd (at most max_bytes). */
size_t http_stream_held_bytes(struct http_stream *s);

/* Pure: appends one event in the text/event-stream format (WHATWG HTML
 * 9.2.6) to out: "id: <id>" (left out when id is 0), "event: <event>" (left
 * out when NULL), one "data: " line per line of data (split at CRLF, LF or
 * CR; NULL is ""), then a blank line. 0, -EINVAL for an event name with CR or
 * LF, or buf_add's error; out is unchanged on failure. */
int http_stream_frame_event(struct buf *out, const char *event, const char *data, uint64_t id);

#endif
