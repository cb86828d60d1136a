/* job_events.c - GET /api/v1/jobs/{id}/events: a training job's changes as
 * Server-Sent Events (docs/jobs.md). One "status" event with the job object
 * (as GET /api/v1/jobs/{id} answers it) at once, then one per change; after
 * the job's final status an "end" event, and the stream ends.
 *
 * Ids increase by one per event; a client that reconnects with
 * Last-Event-ID gets the current state first (no replay), numbered on. */
#include "api/api.h"
#include "api/stream_follow.h"
#include "http/http.h"
#include "labd/app.h"
#include "store/jobs.h"

/* Under the registry's lock: never blocks (a write only appends to the
 * stream's bounded buffer). */
static void on_change(void *ctx, const void *row)
{
	struct stream_follow *sf = ctx;
	const struct job *j = row;

	if (j)
		stream_follow_json(sf, "status", api_job_json(sf->app, j, true));
	if (!j || !jobs_live(j)) {
		stream_follow_event(sf, "end", "");
		stream_follow_end(sf);
	}
}

void api_job_events(struct http_request *req)
{
	struct job j;

	if (api_path_job(req, &j) < 0)
		return;
	jobs_row_free(&j);
	stream_follow_watch(req, http_app(req)->jobs_watch, j.id, on_change, "job event streams");
}
