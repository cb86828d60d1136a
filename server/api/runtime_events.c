/* runtime_events.c - GET /api/v1/me/runtime/events: the caller's runtime as
 * Server-Sent Events. One "runtime" event with what GET /api/v1/me/runtime
 * answers ({"runtime": ...}) at once, then one per change of its state.
 *
 * Ids increase by one per event. A client that reconnects with Last-Event-ID
 * gets no replay: the first event is the current state (which is all a
 * client needs), numbered on from that id so ids keep increasing. */
#include <errno.h>
#include <stdlib.h>

#include "api/api.h"
#include "http/http.h"
#include "http/stream.h"
#include "labd/app.h"
#include "labd/log.h"
#include "runtime/watch.h"
#include "store/runtimes.h"

/* A refused client tries again after this long. */
#define RETRY_AFTER_S "30"

/* One open stream and its subscription; freed when the stream is over. */
struct events_sub {
	struct app *app;
	struct http_stream *stream;      /* our reference */
	struct runtime_watcher *watcher; /* NULL until subscribed */
	uint64_t next_id;                /* only under the registry's lock */
};

/* Under the registry's lock: never blocks (a write only appends to the
 * stream's bounded buffer). */
static void on_change(void *ctx, const struct runtime *r)
{
	struct events_sub *sub = ctx;
	json_t *body = api_runtime_reply(r ? api_runtime_json(r, sub->app->cfg) : json_null());
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;

	/* A failed write has ended the stream; its release unsubscribes. */
	if (text)
		http_stream_event(sub->stream, "runtime", text, sub->next_id++);
	else
		log_error("runtime events: cannot encode the runtime");
	free(text);
	json_decref(body);
}

/* The stream is over (client gone, too slow, shutdown, or refused). */
static void on_close(void *ctx)
{
	struct events_sub *sub = ctx;

	runtime_watch_unsubscribe(sub->app->watch, sub->watcher);
	http_stream_unref(sub->stream);
	free(sub);
}

void api_runtime_events(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	struct app *app = http_app(req);
	struct events_sub *sub = calloc(1, sizeof(*sub));
	int rc;

	if (!sub) {
		http_reply_internal(req);
		return;
	}
	sub->app = app;
	sub->next_id = http_stream_first_id(req);
	sub->stream = http_stream_open(req, app->streams, "text/event-stream",
				       HTTP_STREAM_MAX_BYTES, on_close, sub);
	if (!sub->stream) {
		free(sub); /* the reply says why */
		return;
	}
	rc = runtime_watch_subscribe(app->watch, ident->user.id, on_change, sub, &sub->watcher);
	if (rc == 0)
		return;
	/* Each reply below replaces the stream's, which releases the stream
	 * there and then: on_close frees sub. */
	if (rc == -EUSERS) {
		http_add_header(req, "Retry-After", RETRY_AFTER_S);
		http_reply_error(req, MHD_HTTP_TOO_MANY_REQUESTS, "too_many_streams",
				 "you have %u runtime event streams open; close one first",
				 runtime_watch_count(app->watch, ident->user.id));
	} else if (rc == -ENFILE) {
		http_add_header(req, "Retry-After", RETRY_AFTER_S);
		http_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, "too_many_streams",
				 "the server has too many event streams open; try again later");
	} else {
		http_reply_internal(req);
	}
}
