/* follow.h - following training jobs' logs as they grow (the log events of
 * GET /api/v1/jobs/{id}/logs?follow=1; docs/jobs.md "Logs").
 *
 * One thread reads, every FOLLOW_PERIOD_MS (at once for a new follower,
 * and every 20 ms while one is behind on a backlog), the new bytes of each
 * followed log: ONE read per job and
 * round, shared by all of that job's followers, each of which is at its own
 * offset (a resumed one may be behind). A follower gets "log" events of
 * whole lines (joblog_cut), each with the byte offset after its last line
 * as id, as much as its sink has room for; a partial line waits for its
 * newline unless the job is over. Once the job is over and the follower has
 * every byte, it gets "end" and its sink is ended.
 *
 * A sink is a transport (the API's event stream) seen through callbacks;
 * they run on the hub's thread under its lock and must not block nor call
 * the hub back. */
#ifndef LABD_JOBS_FOLLOW_H
#define LABD_JOBS_FOLLOW_H

#include <stddef.h>
#include <stdint.h>

struct db;
struct follow_hub;
struct follower;
struct labd_config;

#define FOLLOW_PERIOD_MS 200

struct follow_sink {
	/* bytes the sink can take now */
	size_t (*room)(void *ctx);
	/* writes one event; < 0: the sink is gone (it hears nothing more) */
	int (*event)(void *ctx, const char *name, const char *data, uint64_t id);
	/* the follower got "end": close the transport */
	void (*end)(void *ctx);
};

/* Starts the reading thread over cfg's log folder and db's jobs (both
 * borrowed until follow_free), at most max_followers at once and
 * max_per_user of one user (the capped set of labd/watch.h). NULL on
 * failure (logged). */
struct follow_hub *follow_new(const struct labd_config *cfg, struct db *db,
			      unsigned max_followers, unsigned max_per_user);
/* Stops the thread and frees the hub and any follower left. NULL is fine. */
void follow_free(struct follow_hub *h);

/* Follows job_id's log from byte offset for sink (borrowed, with ctx,
 * until follow_remove), counted as user_id's. 0 and *out; -ENFILE when the
 * hub is full, -EUSERS when the user has max_per_user, -ENOMEM. */
int follow_add(struct follow_hub *h, int64_t user_id, int64_t job_id, uint64_t offset,
	       const struct follow_sink *sink, void *ctx, struct follower **out);
/* Followers of user_id now. */
unsigned follow_count_user(struct follow_hub *h, int64_t user_id);
/* Ends a follower: once it returns no callback of it runs. NULL is fine. */
void follow_remove(struct follow_hub *h, struct follower *f);
/* job_id is over: its followers get the rest of the log, then "end". */
void follow_job_ended(struct follow_hub *h, int64_t job_id);
/* Followers now. */
unsigned follow_count(struct follow_hub *h);

#endif
