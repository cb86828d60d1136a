/* gpuqueue.h - GPU runtimes: a start on a free GPU or into the queue, and the
 * queue's pass (expiry, the head of the fair order onto a free GPU, places). */
#ifndef LABD_RUNTIME_GPUQUEUE_H
#define LABD_RUNTIME_GPUQUEUE_H

#include <stdint.h>

struct app;
struct runtime;
struct runtime_resources;

/* A GPU start of the user's: a free GPU at once when it is its turn in the
 * fair order (everything ahead of it could start too) and the host's cap has
 * room, else a queued row (its place computed before this returns). 0 with *out (the row
 * after the backend's answer); -ENODEV when the lab has no GPU, -ENXIO when
 * it has no device of the kind the user's plan gives (docs/gpu.md), -EEXIST
 * when the user has a live runtime, -EIO. */
int gpuqueue_start(struct app *app, int64_t user_id, const char *user, const char *address,
		   const char *token, const struct runtime_resources *res, struct runtime *out);
/* One pass of the queue, from the reconciler (it calls the backend): fails
 * entries past [gpu] queue_max_wait, starts the first runtime of the fair
 * order on a free GPU while it is its turn, and recomputes every place. Its next due time (clock_ms)
 * while anyone waits (a GPU a job frees is seen here: jobs/ cannot poke
 * runtime/), else TICKER_IDLE. */
long long gpuqueue_tick(struct app *app);

#endif
