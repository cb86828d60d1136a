/* host.h - the supervisor's sandbox host: one lifecycle for every sandbox it
 * runs, whatever runs in it. A sandbox is built and torn down by forked workers
 * (launch.h) so the loop never blocks; the host holds its slot, its record for a
 * restarted supervisor (record.h), its pidfd and worker fd, why it ended
 * (endcause.h), its stop or kill, its deadline, the GPUs it holds, its adoption
 * after a restart, its fds in the poll set and its timers. What runs inside is a
 * purpose plugged in through a table of operations (as relayd's procs[]): a
 * user's interactive runtime (host_runtime.h) or a job pool (host_pool.h).
 * Single-threaded: called only from the supervisor's loop. */
#ifndef LABD_HOST_H
#define LABD_HOST_H

#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "labd/sandbox.h"
#include "supervisor/endcause.h"
#include "supervisor/launch.h"

struct labd_config;
struct host;
struct uidmap;

/* H_STOPPING: a runtime's grace after SIGTERM; a pool is killed at once. */
enum host_state { H_STARTING, H_RUNNING, H_STOPPING, H_ENDING, H_ENDED };

/* What the host keeps of every sandbox; a purpose's box begins with it. */
struct host_box {
	bool used;
	const struct host_purpose *purpose;
	char user[LAUNCH_NAME_MAX + 1];
	uid_t host_uid;
	unsigned gpus[SANDBOX_MAX_GPUS]; /* held until the teardown is done */
	unsigned n_gpus;
	struct sandbox_handle h;
	int pidfd;
	pid_t worker; /* while starting or ending */
	int worker_fd;
	int64_t deadline_s, ended_at_s;
	enum host_state state;
	bool ready;        /* the purpose said it answers */
	bool stop_pending; /* asked to stop while still starting */
	bool requested;    /* a grace stop was asked for (user, idle, shutdown) */
	bool failed;
	char cause[ENDCAUSE_CAUSE_MAX];
	char reason[ENDCAUSE_REASON_MAX];
	long long kill_at_ms; /* end of the grace, or the next SIGKILL */
};

/* A purpose: what runs in its sandboxes. Hooks that a purpose does not need are NULL. */
struct host_purpose {
	const char *name;        /* "runtime", "pool": logs and records */
	const char *ended_event; /* sandbox_ended, pool_ended */
	size_t box_size;         /* its box, struct host_box first */
	int max_boxes;
	/* a stop is SIGTERM then SIGKILL after [runtime] stop_grace (true), or a
	 * SIGKILL at once, again each second until the pidfd says gone (false) */
	bool grace;
	const char *deadline_reason;
	/* its share of the host: made after the slots, before adoption */
	void *(*init)(struct host *h);
	void (*release)(void *own);
	/* how logs name a box: "runtime of alice", "pool 7 of alice" */
	void (*describe)(const struct host_box *b, char *out, size_t len);
	/* the fields that tell its boxes apart in events and the list */
	void (*identify)(const struct host_box *b, json_t *obj);
	void (*record_path)(const struct host *h, const struct host_box *b, char *out,
			    size_t len);
	/* its fields beside the host's (user, id, uid, deadline, gpus) */
	void (*record_fields)(const struct host_box *b, json_t *rec);
	/* reads the records in the state dir and adopts each (host_adopt_box) */
	void (*adopt_all)(struct host *h);
	/* the sandbox runs (pidfd open); the purpose starts what outlives us */
	void (*started)(struct host *h, struct host_box *b);
	/* the sandbox's init is gone (res never NULL): classify, release what the
	 * purpose holds, before the teardown */
	void (*died)(struct host *h, struct host_box *b, const struct sandbox_result *res);
	/* the teardown is done: before the ended event, and after it */
	void (*ending)(struct host *h, struct host_box *b);
	void (*ended)(struct host *h, struct host_box *b);
	/* timers of a running or stopping box (after the host's deadline and kill);
	 * returns when next due (-1 none) */
	long long (*tick)(struct host *h, struct host_box *b, long long now, int64_t wall);
	/* once per tick, before the boxes (sweeps); next due or -1 */
	long long (*tick_all)(struct host *h, void *own, long long now, int64_t wall);
	/* its own fds of a live box, and of its share (grow workers) */
	int (*pollfds)(struct host *h, struct host_box *b, struct pollfd *fds, int max);
	int (*pollfds_all)(struct host *h, void *own, struct pollfd *fds, int max);
	/* a readable fd the host does not own; true when it was the purpose's */
	bool (*on_fd)(struct host *h, struct host_box *b, int fd);
	bool (*on_fd_all)(struct host *h, void *own, int fd);
	/* a sandbox_list entry's purpose fields */
	void (*list_entry)(const struct host_box *b, json_t *entry);
	/* counted by host_busy: work under way that a kept shutdown waits for */
	bool (*busy)(const struct host_box *b);
	/* shutdown with keep_on_shutdown; the listener changed (fresh: a web
	 * process said hello where none listened) */
	void (*keep_all)(struct host *h, void *own);
	void (*listening)(struct host *h, void *own, bool fresh);
	/* drops the purpose's fds of a box still live at host_free or sweep */
	void (*forget)(struct host_box *b);
};

/* Where events go: emit borrows the message (channel.c sends it, or drops it
 * while no web process listens; the list reconciles later). */
typedef void (*host_emit_fn)(void *ctx, json_t *event);
/* The same for a reply sent with a descriptor (borrowed) beside it. */
typedef void (*host_emit_fd_fn)(void *ctx, json_t *event, int fd);

/* The purposes in order (their init and adoption run in it); state_dir must be
 * absolute. NULL on failure (logged). */
struct host *host_new(const struct labd_config *cfg, const char *state_dir,
		      const struct host_purpose *const *purposes, int n, host_emit_fn emit,
		      void *ctx);
/* Forgets the sandboxes without stopping them (the next supervisor re-adopts them). */
void host_free(struct host *h);

/* The most fds host_pollfds fills: 4 per box (worker, pidfd, a pool's agent
 * and job worker) and the purposes' own (home growths). */
#define HOST_POLL_MAX (16 + 4 * 512)

/* The loop's verbs, one call each. */
int host_tick(struct host *h); /* ms until the next timer, -1 none */
int host_pollfds(struct host *h, struct pollfd *fds, int max);
void host_on_events(struct host *h, const struct pollfd *fds, int n);
/* Asks every sandbox to stop; host_live() counts down as they end. */
void host_stop_all(struct host *h, const char *reason);
int host_live(const struct host *h);
/* Shutdown with keep_on_shutdown; host_busy() counts the work under way. */
void host_keep_all(struct host *h);
int host_busy(const struct host *h);
/* A web process said hello (true) or is gone (false); host_listening says which. */
void host_set_listening(struct host *h, bool on);
bool host_listening(const struct host *h);

/* Whether a live sandbox of any purpose holds gpu (a device id) or one it conflicts
 * with (starting, running, warm or still being torn down): a card, a MIG instance, a
 * share is held by one sandbox at a time, and a whole card excludes everything on
 * it (gpudev_conflict). */
bool host_gpu_held(const struct host *h, unsigned gpu);
/* sandbox_list: every box of every purpose (pool_id tells them apart). */
json_t *host_list(struct host *h, long long id);

/* Services for the purposes. */
const struct labd_config *host_cfg(const struct host *h);
const char *host_state_dir(const struct host *h);
struct uidmap *host_uids(struct host *h);
void *host_own(struct host *h, const struct host_purpose *p);
void host_emit(struct host *h, json_t *event); /* consumes event */
/* host_emit with fd (borrowed) passed beside it; dropped (fd untouched) when no
 * sender is set. */
void host_set_emit_fd(struct host *h, host_emit_fd_fn fn);
void host_emit_fd(struct host *h, json_t *event, int fd);
/* A new event of type for b, identified by its purpose; the caller adds the rest. */
json_t *host_event(const char *type, const struct host_box *b);
/* The next box of purpose p in use from *i on (start with 0), or NULL. */
struct host_box *host_next(struct host *h, const struct host_purpose *p, int *i);
int host_count(const struct host *h, const struct host_purpose *p, const char *user);
/* A fresh box of p (zeroed, fds -1): reuse (an ended box of p) when given, else
 * a free slot, else an ended box of p's; NULL when p has max_boxes. Not in use
 * until its used is set. */
struct host_box *host_claim(struct host *h, const struct host_purpose *p,
			    struct host_box *reuse);
/* Records b for a restarted supervisor; 0 or a negative errno (logged). */
int host_save(struct host *h, const struct host_box *b);
/* Keeps the first cause (endcause.h). */
void host_set_end(struct host_box *b, const char *cause, bool failed, const char *reason);
/* Stops b by its purpose's rule: a grace stop never counts as failed, a kill
 * does unless it was requested. One asked while starting waits for the start. */
void host_stop(struct host *h, struct host_box *b, const char *cause, const char *reason);
/* The sandbox is gone for good: record forgotten, ended event sent. */
void host_mark_ended(struct host *h, struct host_box *b);
/* Adoption: the host's record fields into b (user, uid, deadline, gpus); the
 * sandbox id, or NULL when the record is not one. */
const char *host_adopt_fields(struct host_box *b, json_t *rec);
/* Ends an adopted box that cannot be taken over: killed and torn down (adopted)
 * or at once, its GPUs held until then. */
void host_adopt_end(struct host *h, struct host_box *b, bool adopted);

#endif
