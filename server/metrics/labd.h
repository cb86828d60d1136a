/* labd.h - labd's own metrics: one call per event from the layer that sees
 * it (the proxy, the WebSocket relay, logins, the runtime layer, the
 * supervisor channel), and their rendering for GET /metrics.
 *
 * Every hook is a relaxed atomic add or store: no lock, no allocation, so
 * the proxy can call metrics_proxy_request once per request. What a scrape
 * reads from elsewhere (runtimes by state and kind, from the store) is
 * rendered by web/scrape.c with the same metrics.h primitives.
 * The GPU queue's pass sets the pool and queue figures; a scrape sets the
 * ledger's totals from the ledger. */
#ifndef LABD_METRICS_LABD_H
#define LABD_METRICS_LABD_H

#include <stdbool.h>
#include <stdint.h>

#include "labd/buf.h"

enum metrics_ledger_kind { METRICS_LEDGER_CPU, METRICS_LEDGER_GPU, METRICS_LEDGER_KINDS };

/* Records the process start time (call once, early in the web process). */
void metrics_process_started(void);
/* A proxied request ended with status (1xx..5xx; others count as 5xx; 0, no
 * reply because the client left first, is not counted) after elapsed_us since
 * the proxy began it. */
void metrics_proxy_request(unsigned status, int64_t elapsed_us);
/* A WebSocket relay opened (+1) or closed (-1). */
void metrics_websockets_add(int delta);
/* A login attempt was refused (wrong password, unknown or disabled user). */
void metrics_login_failure(void);
/* A runtime became ready waited_s seconds after its start was asked for. */
void metrics_runtime_ready(int64_t waited_s);
/* The supervisor channel came up (true) or went away (false). */
void metrics_supervisor_channel(bool up);

/* From the GPU queue's pass: GPUs in the pool and how many are allocated. */
void metrics_gpus_set(int64_t total, int64_t allocated);
/* From the GPU queue's pass: runtimes waiting now. */
void metrics_gpu_queue_set(int64_t waiting);
/* From the GPU queue's pass: a queued start left the queue after waited_s. */
void metrics_gpu_queue_wait(int64_t waited_s);
/* The usage ledger's billable seconds of kind, all entries together. Set
 * from the ledger itself at each scrape: entries are never deleted and only
 * grow, so the total is a counter that also survives a restart. */
void metrics_ledger_set(enum metrics_ledger_kind kind, int64_t total_s);

/* Appends every metric above in the text exposition format. 0 or a negative errno. */
int metrics_render_labd(struct buf *b);
/* Zeroes every metric above (unit tests). */
void metrics_labd_clear(void);

#endif
