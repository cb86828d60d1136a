/* quota_check.h - quota policy over the usage ledger: how much of each
 * rolling window (cpu/gpu seconds per 24 h and per 7 d) a user has used and
 * has left, when the next minutes free up, whether a runtime of a kind may
 * start, and how long it may then run.
 *
 * Rule: a window is "used up" when less than QUOTA_MIN_START_S remains: a
 * runtime that could run less than a minute is refused rather than started
 * and stopped at once. A runtime's deadline is the earlier of its plan's
 * maximum length and the smallest remainder of its kind's windows at start.
 *
 * Folder rule (sched/, layer 5): includes common/, config/, metrics/, store/. */
#ifndef LABD_QUOTA_CHECK_H
#define LABD_QUOTA_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/ledger_window.h"
#include "store/quota.h"

struct db;
struct labd_config;

#define QUOTA_MIN_START_S 60
#define QUOTA_WINDOWS 4 /* cpu_s_per_24h, cpu_s_per_7d, gpu_s_per_24h, gpu_s_per_7d */
/* "unlimited" runtime lengths are capped so that a deadline is a real time */
#define QUOTA_LONGEST_RUNTIME_S (365 * 86400LL)

/* One rolling window of one user at one moment. */
struct quota_window {
	enum quota_limit limit; /* QL_CPU_S_PER_24H .. QL_GPU_S_PER_7D */
	int64_t limit_s;        /* QUOTA_UNLIMITED or >= 0 */
	int64_t used_s;         /* seconds of the kind in [now - window, now) */
	int64_t remaining_s;    /* max(0, limit - used); -1 when unlimited */
	/* Used up: when QUOTA_MIN_START_S are free again. Otherwise, with some
	 * use: when the next second beyond what remains leaves the window.
	 * 0 = never, or nothing to free (unlimited, no use, limit < a minute). */
	int64_t next_free_at;
};

/* The limits of the windows in the order quota_status.win holds them. */
extern const enum quota_limit quota_window_limits[QUOTA_WINDOWS];
/* The window's length (86400 or 604800) and kind of a windowed limit; -EINVAL
 * for any other limit. */
int quota_window_shape(enum quota_limit limit, int64_t *window_s, enum runtime_kind *kind);
/* Pure: fills *out for limit at now_s from the user's spans (any kinds, any
 * times; those outside the window count nothing). 0 or -EINVAL. */
int quota_window_eval(const struct ledger_span *spans, size_t n, enum quota_limit limit,
		      int64_t limit_s, int64_t now_s, struct quota_window *out);
/* Whether less than QUOTA_MIN_START_S remains (never for unlimited). */
bool quota_window_used_up(const struct quota_window *w);

/* A user's effective limits and windows at one moment. */
struct quota_status {
	int64_t now_s;
	struct quota_effective eff;
	struct quota_window win[QUOTA_WINDOWS];
};

/* Reads user_id's limits (config defaults, plans, groups, overrides) and
 * ledger entries of the last 7 days. 0, -EIO, or -E2BIG when the user has
 * more entries in the window than are ever read (refuse then). */
int quota_status_read(struct db *db, const struct labd_config *cfg, int64_t user_id,
		      int64_t now_s, struct quota_status *out);

enum quota_start_verdict {
	QUOTA_START_ALLOWED,
	QUOTA_START_EXCEEDED, /* *refusal: the window that is used up */
	QUOTA_START_NO_GPUS,  /* a gpu start while gpus_per_runtime is 0 */
};

/* Pure: may a runtime of kind start now, and until when. On ALLOWED
 * *deadline_s = now + min(max length, smallest remainder of kind's windows).
 * On EXCEEDED *refusal is the used-up window that frees up last (one that
 * never does first). */
enum quota_start_verdict quota_check_start(const struct quota_status *st, enum runtime_kind kind,
					   int64_t *deadline_s, struct quota_window *refusal);
/* The same for a GPU start on a device that is fraction_milli thousandths of
 * a card (docs/gpu.md: a slice charges that fraction of each second): what
 * remains of a GPU window lasts 1000 / fraction_milli times as long in wall
 * seconds. fraction_milli 0 or above 1000 reads as 1000. Pure. */
enum quota_start_verdict quota_check_start_slice(const struct quota_status *st,
						 enum runtime_kind kind, unsigned fraction_milli,
						 int64_t *deadline_s, struct quota_window *refusal);
/* How many GPUs one runtime of this user holds (gpus_per_runtime; unlimited counts as
 * 64). B's GPU picking takes this many. */
unsigned quota_gpus_per_runtime(const struct quota_status *st);

#endif
