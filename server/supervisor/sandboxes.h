/* sandboxes.h - the supervisor's sandbox host: one sandbox per user running
 * Jupyter, built and torn down by forked workers (launch.h) so the loop never
 * blocks; the deadline enforced here (so a dead web process cannot extend a
 * runtime), stop requests with a grace period, exit classification (OOM,
 * signal, status), events pushed to the web process (ready, ended + cause,
 * deadline warnings) and re-adoption of sandboxes that outlived a supervisor
 * restart. Single-threaded: called only from the supervisor's loop. */
#ifndef LABD_SANDBOXES_H
#define LABD_SANDBOXES_H

#include <jansson.h>
#include <poll.h>
#include <stdbool.h>

struct labd_config;
struct sandboxes;

/* Where events go: emit borrows the message (supervisor/channel.c sends it,
 * or drops it while no web process listens; the list reconciles later). */
struct sandboxes_events {
	void (*emit)(void *ctx, json_t *event);
	/* whether something else (a job pool) holds gpu; may be NULL */
	bool (*gpu_held)(void *ctx, unsigned gpu);
	void *ctx;
};

/* Re-adopts sandboxes recorded in the state dirs (statedir_prepare made them).
 * state_dir must be absolute. NULL on failure (logged). */
struct sandboxes *sandboxes_new(const struct labd_config *cfg, const char *state_dir,
				const struct sandboxes_events *ev);
/* Forgets the sandboxes without stopping them (they are re-adopted by the next
 * supervisor) and frees the set. */
void sandboxes_free(struct sandboxes *sb);

/* Handlers for requests checked against proto.h's field lists; each returns
 * the reply (caller owns it). A start is answered when the build has begun;
 * sandbox_ready or sandbox_ended follows. */
json_t *sandboxes_start(struct sandboxes *sb, long long id, json_t *msg);
json_t *sandboxes_stop(struct sandboxes *sb, long long id, json_t *msg);
json_t *sandboxes_list(struct sandboxes *sb, long long id);
/* home_usage / home_resize (homesize.h), once the user name and id are
 * checked against root's own record of them. */
json_t *sandboxes_home_usage(struct sandboxes *sb, long long id, json_t *msg);
json_t *sandboxes_home_resize(struct sandboxes *sb, long long id, json_t *msg);
/* The user is gone: their uid is retired, their sandbox (if any) stopped,
 * and their home archived or removed once that sandbox's teardown is done. */
json_t *sandboxes_user_deleted(struct sandboxes *sb, long long id, json_t *msg);
#define SANDBOXES_MAX_WARNINGS 4
/* What the host's cgroups lack (sandbox_host_warnings), as a new JSON array of
 * strings, for the hello reply: labd-web shows it to admins in /api/v1/health. */
json_t *sandboxes_warnings(void);

/* Whether a runtime (or, through the gpu_held event, a job pool) holds gpu now:
 * starting, running or still being torn down. */
bool sandboxes_gpu_held(const struct sandboxes *sb, unsigned gpu);
/* Root's record of lab users' host uids, shared with the job pools. */
struct uidmap *sandboxes_uids(struct sandboxes *sb);

/* Asks every sandbox to stop (used when [runtime] keep_on_shutdown is false);
 * sandboxes_live() then counts down as they end. */
void sandboxes_stop_all(struct sandboxes *sb, const char *reason);
int sandboxes_live(struct sandboxes *sb);

/* Fills up to max pollfds to watch (sandbox pidfds, worker sockets). */
int sandboxes_pollfds(struct sandboxes *sb, struct pollfd *fds, int max);
/* Handles readiness of fds filled by sandboxes_pollfds. */
void sandboxes_on_events(struct sandboxes *sb, const struct pollfd *fds, int n);
/* Probes starting Jupyters, sends warnings, enforces deadlines and grace
 * periods; returns ms until the next timer (-1 none). */
int sandboxes_tick(struct sandboxes *sb);

#endif
