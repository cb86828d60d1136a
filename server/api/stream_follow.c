/* stream_follow.c - an event stream fed by a subscription; see
 * stream_follow.h. */
#include "api/stream_follow.h"

#include <errno.h>
#include <stdlib.h>

#include "http/http.h"
#include "http/stream.h"
#include "labd/app.h"
#include "labd/log.h"

/* A refused client tries again after this long. */
#define RETRY_AFTER_S "30"

static int watch_subscribe_sf(struct stream_follow *sf, uint64_t from)
{
	struct watcher *sub;
	int rc = watch_subscribe(sf->watch, sf->user_id, sf->key, sf->on_change, sf, &sub);

	(void)from;
	if (rc == 0)
		sf->sub = sub;
	return rc;
}

static void watch_unsubscribe_sf(struct stream_follow *sf)
{
	watch_unsubscribe(sf->watch, sf->sub);
}

static unsigned watch_count_sf(struct stream_follow *sf)
{
	return watch_count(sf->watch, sf->user_id);
}

static const struct stream_feed watch_feed = {
	HTTP_STREAM_MAX_BYTES, watch_subscribe_sf, watch_unsubscribe_sf, watch_count_sf};

/* The stream is over (client gone, too slow, shutdown, or refused). */
static void on_close(void *ctx)
{
	struct stream_follow *sf = ctx;

	if (sf->sub)
		sf->feed->unsubscribe(sf);
	http_stream_unref(sf->stream);
	free(sf);
}

/* Each reply replaces the stream's, whose release frees sf there and then:
 * nothing of sf is read after. */
static void reply_refused(struct http_request *req, struct stream_follow *sf, int rc)
{
	const char *what = sf->what;

	if (rc == -EUSERS) {
		unsigned n = sf->feed->count(sf);
		http_add_header(req, "Retry-After", RETRY_AFTER_S);
		http_reply_error(req, MHD_HTTP_TOO_MANY_REQUESTS, "too_many_streams",
				 "you have %u %s open; close one first", n, what);
	} else if (rc == -ENFILE) {
		http_add_header(req, "Retry-After", RETRY_AFTER_S);
		http_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, "too_many_streams",
				 "the server has too many %s open; try again later", what);
	} else if (rc == -ENOENT) {
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "it is gone");
	} else {
		http_reply_internal(req);
	}
}

static void open_stream(struct http_request *req, const struct stream_feed *feed, int64_t key,
			uint64_t from, const char *what, struct watch *w, watch_fn on_change)
{
	struct stream_follow *sf = calloc(1, sizeof(*sf));
	int rc;

	if (!sf) {
		http_reply_internal(req);
		return;
	}
	*sf = (struct stream_follow){.app = http_app(req),
				     .feed = feed,
				     .what = what,
				     .user_id = http_identity(req)->user.id,
				     .key = key,
				     .watch = w,
				     .on_change = on_change,
				     .next_id = http_stream_first_id(req)};
	sf->stream = http_stream_open(req, sf->app->streams, "text/event-stream",
				      sf->feed->max_bytes, on_close, sf);
	if (!sf->stream) {
		free(sf); /* the reply says why */
		return;
	}
	if ((rc = sf->feed->subscribe(sf, from)) < 0)
		reply_refused(req, sf, rc);
}

void stream_follow_watch(struct http_request *req, struct watch *w, int64_t key,
			 watch_fn on_change, const char *what)
{
	if (!w)
		http_reply_internal(req);
	else
		open_stream(req, &watch_feed, key, 0, what, w, on_change);
}

void stream_follow_feed(struct http_request *req, const struct stream_feed *feed, int64_t key,
			uint64_t from, const char *what)
{
	open_stream(req, feed, key, from, what, NULL, NULL);
}

int stream_follow_event(struct stream_follow *sf, const char *name, const char *data)
{
	return http_stream_event(sf->stream, name, data, sf->next_id++);
}

int stream_follow_json(struct stream_follow *sf, const char *name, json_t *obj)
{
	char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	int rc = -ENOMEM;

	if (text)
		rc = stream_follow_event(sf, name, text);
	else
		log_error("event stream: cannot encode a %s event", name);
	free(text);
	json_decref(obj);
	return rc;
}

size_t stream_follow_room(void *ctx)
{
	struct stream_follow *sf = ctx;
	size_t held = http_stream_held_bytes(sf->stream);

	return held < sf->feed->max_bytes ? sf->feed->max_bytes - held : 0;
}

int stream_follow_event_at(void *ctx, const char *name, const char *data, uint64_t id)
{
	struct stream_follow *sf = ctx;

	return http_stream_event(sf->stream, name, data, id);
}

void stream_follow_end(void *ctx)
{
	struct stream_follow *sf = ctx;

	http_stream_close(sf->stream);
}
