/* job_events.c - GET /api/v1/jobs/{id}/events: a training job's changes as
 * Server-Sent Events (docs/jobs.md). One "status" event with the job object
 * (as GET /api/v1/jobs/{id} answers it) at once, then one per change; after
 * the job's final status an "end" event, and the stream ends.
 *
 * Ids increase by one per event; a client that reconnects with
 * Last-Event-ID gets the current state first (no replay), numbered on. */
#include <errno.h>
#include <stdlib.h>

#include "api/api.h"
#include "http/http.h"
#include "http/stream.h"
#include "jobs/observe.h"
#include "jobs/watch.h"
#include "labd/app.h"
#include "labd/log.h"
#include "store/jobs.h"

#define RETRY_AFTER_S "30"

struct events_sub {
	struct app *app;
	struct jobs_watch *watch;
	struct http_stream *stream;    /* our reference */
	struct jobs_watcher *watcher;  /* NULL until subscribed */
	uint64_t next_id;              /* only under the registry's lock */
};

/* Under the registry's lock: never blocks (a write only appends to the
 * stream's bounded buffer). */
static void on_change(void *ctx, const struct job *j)
{
	struct events_sub *sub = ctx;
	json_t *obj = j ? api_job_json(sub->app, j, true) : NULL;
	char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;

	/* a failed write has ended the stream; its release unsubscribes */
	if (text)
		http_stream_event(sub->stream, "status", text, sub->next_id++);
	else if (j)
		log_error("job events: cannot encode job %lld", (long long)j->id);
	if (!j || !jobs_live(j)) {
		http_stream_event(sub->stream, "end", "", sub->next_id++);
		http_stream_close(sub->stream);
	}
	free(text);
	json_decref(obj);
}

static void on_close(void *ctx)
{
	struct events_sub *sub = ctx;

	jobs_watch_unsubscribe(sub->watch, sub->watcher);
	http_stream_unref(sub->stream);
	free(sub);
}

void api_job_events(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	struct app *app = http_app(req);
	struct events_sub *sub;
	struct job j;
	int rc;

	if (api_path_job(req, &j) < 0)
		return;
	jobs_row_free(&j);
	if (!observe_watch(app) || !(sub = calloc(1, sizeof(*sub)))) {
		http_reply_internal(req);
		return;
	}
	sub->app = app;
	sub->watch = observe_watch(app);
	sub->next_id = http_stream_first_id(req);
	sub->stream = http_stream_open(req, app->streams, "text/event-stream",
				       HTTP_STREAM_MAX_BYTES, on_close, sub);
	if (!sub->stream) {
		free(sub); /* the reply says why */
		return;
	}
	rc = jobs_watch_subscribe(sub->watch, ident->user.id, j.id, on_change, sub, &sub->watcher);
	if (rc == 0)
		return;
	/* each reply below replaces the stream's, whose release frees sub */
	if (rc == -EUSERS) {
		http_add_header(req, "Retry-After", RETRY_AFTER_S);
		http_reply_error(req, MHD_HTTP_TOO_MANY_REQUESTS, "too_many_streams",
				 "you have %u job event streams open; close one first",
				 jobs_watch_count(sub->watch, ident->user.id));
	} else if (rc == -ENFILE) {
		http_add_header(req, "Retry-After", RETRY_AFTER_S);
		http_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, "too_many_streams",
				 "the server has too many event streams open; try again later");
	} else if (rc == -ENOENT) {
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no job with id %lld",
				 (long long)j.id);
	} else {
		http_reply_internal(req);
	}
}
