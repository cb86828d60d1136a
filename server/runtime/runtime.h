/* runtime.h - the user's interactive runtime: its lifecycle on the web side.
 *
 * Folder rule: runtime/ includes store/, backend/, config/ and common/; it
 * never names the proxy or HTTP: what the proxy must forget when a runtime
 * ends reaches it through app->on_runtime_ended, set by web/.
 *
 * A start inserts a starting row and hands the sandbox to the backend; the
 * backend's events move the row on (ready -> running, ended -> stopped or
 * failed with the cause) without polling. Reconciliation is total: after the
 * channel comes up, when a backend call timed out, and every few minutes as a
 * safety net, every sandbox is matched to a live row or stopped, and every
 * live row to a sandbox or ended.
 *
 * The folder, top to bottom (no file includes one above it): runtime.c the
 * entry points and the backend's events; reconcile.c the reconciler's pass
 * (timers, the GPU queue's pass, total reconciliation) on a ticker;
 * gpuqueue.c the GPU starts and the queue's pass; moves.c the row moves they
 * share, with the one "row moved" hook; poke.c the reconciler's handle. */
#ifndef LABD_RUNTIME_H
#define LABD_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "sched/quota_check.h"
#include "store/plans.h"
#include "store/runtimes.h"

struct app;

enum runtime_start_result {
	RUNTIME_START_OK,      /* *out is the new row (starting, queued for a GPU, or failed if refused) */
	RUNTIME_START_EXISTS,  /* the user has a live runtime */
	RUNTIME_START_NO_GPU,  /* the lab has no GPU at all */
	RUNTIME_START_ERROR,   /* store or token failure */
	RUNTIME_START_QUOTA,   /* a rolling window of the kind is used up: *refusal */
	RUNTIME_START_NO_GPUS_ALLOWED, /* the user's gpus_per_runtime is 0 */
	RUNTIME_START_HOST_FULL,       /* the host runs its cap of sandboxes (sched/caps.h) */
	RUNTIME_START_GPUS_HELD,       /* a GPU start while the user's jobs or warm pools hold
					* GPUs and [quota] gpus_held leaves no room */
};

/* Starts a runtime of kind for the user (address: the client's, for the
 * audit) after the quota check (sched/quota_check.h; nothing is created when
 * it refuses). On OK *out is the row as it is after the backend's answer
 * (failed with the reason when it refused); on QUOTA *refusal (may be NULL)
 * is the used-up window. */
enum runtime_start_result runtime_start(struct app *app, int64_t user_id, const char *user,
					const char *address, enum runtime_kind kind,
					struct runtime *out, struct quota_window *refusal);
/* Asks the backend to stop r and marks it stopping (or ended when the backend
 * no longer has it); a queued r just leaves the queue, stopped with reason.
 * 0, or -ETIMEDOUT when the backend did not answer. */
int runtime_stop(struct app *app, const struct runtime *r, const char *reason);
/* 0 when the backend answers. */
int runtime_backend_ping(struct app *app);
/* The account was disabled: its live runtime (if any) is asked to stop at
 * once, with reason. 0, or a negative errno. */
int runtime_end_account(struct app *app, int64_t user_id, const char *reason);
/* The account is deleted (its rows are gone): the backend stops its sandbox
 * at once, retires its uid and archives or removes its home. 0, or a
 * negative errno (logged). */
int runtime_forget_account(struct app *app, const char *user, int64_t user_id);
/* The user's home as the backend sees it (storage quota); 0 or a negative
 * errno (backend_home_usage). */
int runtime_home_usage(struct app *app, const char *user, int64_t user_id,
		       struct backend_home *out);
/* Grows the user's home to size_bytes now or at its next start
 * (backend_home_resize). */
int runtime_home_resize(struct app *app, const char *user, int64_t user_id, int64_t size_bytes,
			enum backend_home_applied *applied);
/* What the backend's host lacks for the sandbox limits, one sentence a line ("" when
 * nothing); borrowed. Shown to admins in /api/v1/health. */
const char *runtime_backend_warnings(struct app *app);

/* The events a backend delivers, bound to app (runtime_events_init). */
void runtime_events_init(struct backend_events *ev, struct app *app);
/* Why a starting runtime still waits, when its backend's scheduler says so (Slurm:
 * the pending reason in words into text, BACKEND_QUEUE_TEXT_MAX, and its start
 * estimate, epoch s or 0). 0, or -ENOENT when it does not wait there. */
int runtime_backend_queue(struct app *app, int64_t runtime_id, char *text, size_t len,
			  int64_t *estimate_at);
/* When the backend placed a starting runtime where it runs (Slurm: its node took
 * the start; epoch s, 0 while it waits): 0, or -ENOENT where starts are placed at
 * once (the local backend). */
int runtime_backend_placed_at(struct app *app, int64_t runtime_id, int64_t *at);
/* Where the proxy and the Jupyter client connect: the Unix socket of a "unix:"
 * endpoint, or a node's whole "tcp:HOST:PORT/PATH" endpoint (endpoint.h) into out;
 * -1 for other endpoints. */
int runtime_socket_path(const struct runtime *r, char *out, size_t len);

#endif
