/* stream_follow.h - one Server-Sent Events reply fed by a subscription: the
 * runtime's events, a job's events, a job's log (follow mode). It opens the
 * stream, subscribes, answers a refusal (429 when the user has too many
 * streams, 503 when the server has, both with Retry-After; 404 when the row
 * went away) and unsubscribes when the stream is over. api/ only. */
#ifndef LABD_API_STREAM_FOLLOW_H
#define LABD_API_STREAM_FOLLOW_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "labd/watch.h"

struct app;
struct http_request;
struct http_stream;

/* One open stream and its subscription; freed when the stream is over. */
struct stream_follow {
	struct app *app;
	struct http_stream *stream; /* our reference */
	const struct stream_feed *feed;
	const char *what;           /* "job log streams": the 429 says how many */
	int64_t user_id, key;       /* whose, and what it follows */
	void *sub;                  /* the subscription; NULL until made */
	struct watch *watch;        /* a registry's feed: the registry */
	watch_fn on_change;         /* and what writes its events (ctx: this) */
	uint64_t next_id;           /* the next event's id; under the feed's lock */
};

/* Where a stream's events come from, when not from a registry. */
struct stream_feed {
	size_t max_bytes; /* unsent bytes the stream may hold */
	/* Subscribes sf to sf->key from byte from (a log's offset); 0 with
	 * sf->sub set, -EUSERS, -ENFILE, -ENOENT, or another negative errno. */
	int (*subscribe)(struct stream_follow *sf, uint64_t from);
	void (*unsubscribe)(struct stream_follow *sf);
	/* sf->user_id's subscriptions now. */
	unsigned (*count)(struct stream_follow *sf);
};

/* Answers req with an event stream of registry w's row key (the caller's
 * subscription): on_change(sf, row) writes its events, under the registry's
 * lock. what names the streams in the 429. */
void stream_follow_watch(struct http_request *req, struct watch *w, int64_t key,
			 watch_fn on_change, const char *what);
/* Answers req with an event stream fed by feed, following key from from. */
void stream_follow_feed(struct http_request *req, const struct stream_feed *feed, int64_t key,
			uint64_t from, const char *what);

/* Writes event name with data and the next id. 0, or what http_stream_event
 * returns (a failed write has ended the stream; its close unsubscribes). */
int stream_follow_event(struct stream_follow *sf, const char *name, const char *data);
/* Writes event name with obj as compact JSON (taking obj; NULL: logged,
 * nothing written). */
int stream_follow_json(struct stream_follow *sf, const char *name, json_t *obj);
/* The stream as a sink of events that carry their own ids (jobs/follow.h's
 * struct follow_sink; ctx is the struct stream_follow): the bytes it can
 * take now, one event with id, and the end once what was written is sent. */
size_t stream_follow_room(void *ctx);
int stream_follow_event_at(void *ctx, const char *name, const char *data, uint64_t id);
void stream_follow_end(void *ctx);

#endif
