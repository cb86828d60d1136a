/* job_logs.c - GET /api/v1/jobs/{id}/logs: a training job's log
 * (docs/jobs.md "Logs").
 *
 * Without follow: the bytes from ?offset (0) on, at most ?limit (1 MiB),
 * as text/plain, with X-Log-Size (the log's size now) and
 * X-Log-Next-Offset (where the next read starts). With ?follow=1: an
 * event stream of "log" events, each some whole lines, its id the byte
 * offset after them, from Last-Event-ID (a reconnecting client's) or
 * ?offset on; "end" once the job is over and every byte was sent. A log
 * that does not exist yet is empty. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "api/stream_follow.h"
#include "http/http.h"
#include "jobs/follow.h"
#include "jobs/joblog.h"
#include "jobs/observe.h"
#include "labd/app.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "store/jobs.h"

#define LIMIT_DEFAULT_BYTES (1024 * 1024)
#define LIMIT_MAX_BYTES (16 * 1024 * 1024)
/* A log stream may hold this much unsent: a resumed follower catches up
 * at up to this much per round of the followers' thread (200 ms), and a
 * stalled client pins no more (the whole log is a range read away). */
#define STREAM_MAX_BYTES (256 * 1024)

/* ?follow: 1/true or 0/false. 0, or -1 with the 400. */
static int query_follow(struct http_request *req, bool *follow)
{
	const char *text = http_query(req, "follow");

	*follow = false;
	if (!text || !strcmp(text, "0") || !strcmp(text, "false"))
		return 0;
	if (!strcmp(text, "1") || !strcmp(text, "true")) {
		*follow = true;
		return 0;
	}
	api_reply_field(req, "follow", "query parameter \"follow\" must be 1, true, 0 or false");
	return -1;
}

static void add_offset_header(struct http_request *req, const char *name, uint64_t v)
{
	char text[24];

	snprintf(text, sizeof(text), "%" PRIu64, v);
	http_add_header(req, name, text);
}

/* The range read: the file's bytes served from the file itself. */
static void reply_range(struct http_request *req, const char *path, uint64_t offset,
			uint64_t limit)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct MHD_Response *resp;
	struct stat st;
	uint64_t size = 0, n;

	if (fd < 0 && errno != ENOENT) {
		log_errno("job log %s: open", path);
		http_reply_internal(req);
		return;
	}
	if (fd >= 0 && fstat(fd, &st) == 0)
		size = (uint64_t)st.st_size;
	if (offset > size)
		offset = size;
	n = size - offset < limit ? size - offset : limit;
	add_offset_header(req, "X-Log-Size", size);
	add_offset_header(req, "X-Log-Next-Offset", offset + n);
	if (fd >= 0 && n > 0) {
		/* the reply owns fd from here */
		resp = MHD_create_response_from_fd_at_offset64(n, fd, offset);
		if (!resp)
			close(fd);
	} else {
		if (fd >= 0)
			close(fd);
		resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	}
	if (resp)
		MHD_add_response_header(resp, "Content-Type", "text/plain; charset=utf-8");
	http_reply_response(req, MHD_HTTP_OK, resp);
}

/* The log's followers (jobs/follow.h) as a stream's feed: their events
 * carry their own ids (the offset after their lines). */
static const struct follow_sink log_sink = {stream_follow_room, stream_follow_event_at,
					    stream_follow_end};

static int log_subscribe(struct stream_follow *sf, uint64_t offset)
{
	struct follow_hub *hub = observe_follow(sf->app);
	struct follower *f;
	int rc = hub ? follow_add(hub, sf->user_id, sf->key, offset, &log_sink, sf, &f) : -EIO;

	if (rc == 0)
		sf->sub = f;
	return rc;
}

static void log_unsubscribe(struct stream_follow *sf)
{
	follow_remove(observe_follow(sf->app), sf->sub);
}

static unsigned log_count(struct stream_follow *sf)
{
	return follow_count_user(observe_follow(sf->app), sf->user_id);
}

static const struct stream_feed log_feed = {STREAM_MAX_BYTES, log_subscribe, log_unsubscribe,
					    log_count};

/* Where a follower starts: after the client's Last-Event-ID (an offset the
 * server gave), else ?offset. 0, or -1 with the 400. */
static int follow_offset(struct http_request *req, uint64_t *offset)
{
	const char *last = http_header(req, "Last-Event-ID");

	if (last && last[0] && parse_uint(last, 0, INT64_MAX, offset) == 0)
		return 0;
	*offset = 0;
	return api_query_uint(req, "offset", 0, INT64_MAX, offset);
}

void api_job_logs(struct http_request *req)
{
	struct app *app = http_app(req);
	char path[4096];
	uint64_t offset = 0, limit = LIMIT_DEFAULT_BYTES;
	bool follow;
	struct job j;

	if (api_path_job(req, &j) < 0)
		return;
	jobs_row_free(&j);
	if (query_follow(req, &follow) < 0 ||
	    api_query_uint(req, "limit", 1, LIMIT_MAX_BYTES, &limit) < 0)
		return;
	if (follow) {
		if (follow_offset(req, &offset) == 0)
			stream_follow_feed(req, &log_feed, j.id, offset, "job log streams");
		return;
	}
	if (api_query_uint(req, "offset", 0, INT64_MAX, &offset) < 0)
		return;
	if (jobs_log_path(app->cfg, j.id, path, sizeof(path)) < 0) {
		http_reply_internal(req);
		return;
	}
	reply_range(req, path, offset, limit);
}
