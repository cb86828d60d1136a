/* quota_check.c - rolling-window quota policy; see quota_check.h. */
#include "sched/quota_check.h"

#include <errno.h>

#include "labd/buf.h"
#include "store/ledger.h"
#include "store/user_quotas.h"

#define DAY_S 86400LL
/* Entries of one user in 7 days that are ever read: even one-second runtimes
 * back to back would need far fewer starts than this. */
#define QUOTA_SPANS_MAX 65536

const enum quota_limit quota_window_limits[QUOTA_WINDOWS] = {
	QL_CPU_S_PER_24H, QL_CPU_S_PER_7D, QL_GPU_S_PER_24H, QL_GPU_S_PER_7D};

int quota_window_shape(enum quota_limit limit, int64_t *window_s, enum runtime_kind *kind)
{
	switch (limit) {
	case QL_CPU_S_PER_24H: *window_s = DAY_S, *kind = RUNTIME_CPU; return 0;
	case QL_CPU_S_PER_7D: *window_s = 7 * DAY_S, *kind = RUNTIME_CPU; return 0;
	case QL_GPU_S_PER_24H: *window_s = DAY_S, *kind = RUNTIME_GPU; return 0;
	case QL_GPU_S_PER_7D: *window_s = 7 * DAY_S, *kind = RUNTIME_GPU; return 0;
	default: return -EINVAL;
	}
}

bool quota_window_used_up(const struct quota_window *w)
{
	return w->limit_s != QUOTA_UNLIMITED && w->remaining_s < QUOTA_MIN_START_S;
}

int quota_window_eval(const struct ledger_span *spans, size_t n, enum quota_limit limit,
		      int64_t limit_s, int64_t now_s, struct quota_window *out)
{
	int64_t window_s, need_s, at;
	enum runtime_kind kind;

	if (quota_window_shape(limit, &window_s, &kind) < 0)
		return -EINVAL;
	*out = (struct quota_window){.limit = limit, .limit_s = limit_s, .remaining_s = -1};
	out->used_s = ledger_window_sum_s(spans, n, kind, now_s - window_s, now_s);
	if (limit_s == QUOTA_UNLIMITED)
		return 0;
	out->remaining_s = limit_s > out->used_s ? limit_s - out->used_s : 0;
	if (out->used_s == 0)
		return 0;
	/* used up: when a start is possible again; else when what remains first
	 * grows (the oldest second in the window leaves it) */
	need_s = quota_window_used_up(out) ? QUOTA_MIN_START_S : out->remaining_s + 1;
	at = ledger_window_free_at(spans, n, kind, window_s, limit_s, need_s, now_s);
	out->next_free_at = at > 0 ? at : 0; /* -ERANGE: a limit below the need never frees */
	return 0;
}

struct span_walk {
	struct buf spans;
	bool full;
};

static int add_span(const struct ledger_entry *e, void *ctx)
{
	struct span_walk *w = ctx;
	struct ledger_span s;

	ledger_entry_span(e, &s);
	w->full = buf_add(&w->spans, &s, sizeof(s)) < 0;
	return w->full; /* non-zero stops the walk */
}

int quota_status_read(struct db *db, const struct labd_config *cfg, int64_t user_id,
		      int64_t now_s, struct quota_status *out)
{
	struct quota_limits defaults;
	struct span_walk w = {.full = false};
	int rc = 0;

	out->now_s = now_s;
	user_quotas_defaults(cfg, &defaults);
	if (user_quotas_effective(db, user_id, &defaults, &out->eff) < 0)
		return -EIO;
	buf_init(&w.spans, QUOTA_SPANS_MAX * sizeof(struct ledger_span));
	/* the longest window, up to a second past now: an open entry's heartbeat
	 * may be a moment ahead of this thread's clock */
	if (ledger_each(db, user_id, now_s - 7 * DAY_S, now_s + 1, add_span, &w) < 0)
		rc = -EIO;
	else if (w.full)
		rc = -E2BIG;
	for (int i = 0; rc == 0 && i < QUOTA_WINDOWS; i++) {
		enum quota_limit l = quota_window_limits[i];
		quota_window_eval((const struct ledger_span *)w.spans.data,
				  w.spans.len / sizeof(struct ledger_span), l, out->eff.v[l], now_s,
				  &out->win[i]);
	}
	buf_release(&w.spans);
	return rc;
}

/* Whether a refused window a frees up later than b (never = latest). */
static bool frees_later(const struct quota_window *a, const struct quota_window *b)
{
	if (b->next_free_at == 0)
		return false;
	return a->next_free_at == 0 || a->next_free_at > b->next_free_at;
}

enum quota_start_verdict quota_check_start(const struct quota_status *st, enum runtime_kind kind,
					   int64_t *deadline_s, struct quota_window *refusal)
{
	return quota_check_start_slice(st, kind, 1000, deadline_s, refusal);
}

/* Wall seconds that remaining_s charged seconds last on a device of fraction_milli. */
static int64_t wall_s(int64_t remaining_s, enum runtime_kind kind, unsigned fraction_milli)
{
	if (kind != RUNTIME_GPU || fraction_milli == 0 || fraction_milli >= 1000)
		return remaining_s;
	if (remaining_s > QUOTA_LONGEST_RUNTIME_S)
		return QUOTA_LONGEST_RUNTIME_S;
	return remaining_s * 1000 / fraction_milli;
}

enum quota_start_verdict quota_check_start_slice(const struct quota_status *st,
						 enum runtime_kind kind, unsigned fraction_milli,
						 int64_t *deadline_s, struct quota_window *refusal)
{
	enum quota_limit max_limit = kind == RUNTIME_GPU ? QL_GPU_RUNTIME_MAX_S : QL_CPU_RUNTIME_MAX_S;
	int64_t length_s = st->eff.v[max_limit], window_s;
	const struct quota_window *worst = NULL;
	enum runtime_kind wkind = kind;

	if (kind == RUNTIME_GPU && quota_gpus_per_runtime(st) == 0)
		return QUOTA_START_NO_GPUS;
	if (length_s == QUOTA_UNLIMITED || length_s > QUOTA_LONGEST_RUNTIME_S)
		length_s = QUOTA_LONGEST_RUNTIME_S;
	for (int i = 0; i < QUOTA_WINDOWS; i++) {
		const struct quota_window *w = &st->win[i];
		if (quota_window_shape(w->limit, &window_s, &wkind) < 0 || wkind != kind ||
		    w->limit_s == QUOTA_UNLIMITED)
			continue;
		if (quota_window_used_up(w) && (!worst || frees_later(w, worst)))
			worst = w;
		if (wall_s(w->remaining_s, kind, fraction_milli) < length_s)
			length_s = wall_s(w->remaining_s, kind, fraction_milli);
	}
	if (worst) {
		*refusal = *worst;
		return QUOTA_START_EXCEEDED;
	}
	*deadline_s = st->now_s + length_s;
	return QUOTA_START_ALLOWED;
}

unsigned quota_gpus_per_runtime(const struct quota_status *st)
{
	int64_t v = st->eff.v[QL_GPUS_PER_RUNTIME];

	return v == QUOTA_UNLIMITED || v > 64 ? 64 : (unsigned)v;
}
