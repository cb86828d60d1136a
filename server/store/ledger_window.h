/* ledger_window.h - rolling-window arithmetic over ledger spans: pure
 * functions (no store, no clock) so quotas and the usage API agree to the
 * second and the boundaries are unit-tested. Windows are half-open [from, to). */
#ifndef LABD_LEDGER_WINDOW_H
#define LABD_LEDGER_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "store/runtimes.h"

/* One entry's billed interval [start_s, end_s); an open entry ends at its
 * last heartbeat. gpus: the GPUs it held, each second of the span counting
 * that many times (a job with gpu_count 2 uses two GPU-seconds a second);
 * 0 counts as 1, as for a CPU entry. fraction_milli (schema 20): the share of
 * its card each of a GPU entry's devices is, in thousandths (a MIG instance:
 * its memory over the card's; a time-sliced share: 1/count; a whole card:
 * 1000), so a GPU-second of a slice counts that fraction of a card's; 0
 * counts as 1000, as for a CPU entry. */
struct ledger_span {
	int64_t start_s, end_s;
	enum runtime_kind kind;
	unsigned gpus;
	unsigned fraction_milli;
	unsigned hosts; /* sandboxes at once (a job on several hosts); 0 reads as 1 */
};

/* Seconds of span inside [from_s, to_s), times its hosts, its GPUs and, for a GPU span,
 * its fraction (rounded down: a slice is never charged more than it held):
 * 0 when they do not overlap. */
int64_t ledger_clip_s(const struct ledger_span *s, int64_t from_s, int64_t to_s);
/* Seconds of kind inside [from_s, to_s), each span clipped to the window. */
int64_t ledger_window_sum_s(const struct ledger_span *spans, size_t n, enum runtime_kind kind,
			    int64_t from_s, int64_t to_s);
/* The earliest time t >= now_s at which the rolling window [t - window_s, t)
 * holds at most limit_s - need_s seconds of kind, assuming no new use (spans
 * end by now_s): when the next need_s seconds are free. -ERANGE when need_s
 * exceeds limit_s (never free), -EINVAL for a window or need below 1. */
int64_t ledger_window_free_at(const struct ledger_span *spans, size_t n, enum runtime_kind kind,
			      int64_t window_s, int64_t limit_s, int64_t need_s, int64_t now_s);

#endif
