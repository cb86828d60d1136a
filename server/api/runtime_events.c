/* runtime_events.c - GET /api/v1/me/runtime/events: the caller's runtime as
 * Server-Sent Events. One "runtime" event with what GET /api/v1/me/runtime
 * answers ({"runtime": ...}) at once, then one per change of its state.
 *
 * Ids increase by one per event. A client that reconnects with Last-Event-ID
 * gets no replay: the first event is the current state (which is all a
 * client needs), numbered on from that id so ids keep increasing. */
#include "api/api.h"
#include "api/stream_follow.h"
#include "http/http.h"
#include "labd/app.h"
#include "store/runtimes.h"

/* Under the registry's lock: never blocks (a write only appends to the
 * stream's bounded buffer). */
static void on_change(void *ctx, const void *row)
{
	struct stream_follow *sf = ctx;
	const struct runtime *r = row;

	stream_follow_json(sf, "runtime",
			   api_runtime_reply(r ? api_runtime_slurm(api_runtime_json(r, sf->app->cfg),
								   r, sf->app)
					       : json_null()));
}

void api_runtime_events(struct http_request *req)
{
	int64_t user_id = http_identity(req)->user.id;

	stream_follow_watch(req, http_app(req)->watch, user_id, on_change,
			    "runtime event streams");
}
