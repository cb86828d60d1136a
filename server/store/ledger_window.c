/* ledger_window.c - rolling-window sums; see ledger_window.h. */
#include "store/ledger_window.h"

#include <errno.h>

int64_t ledger_clip_s(const struct ledger_span *s, int64_t from_s, int64_t to_s)
{
	int64_t a = s->start_s > from_s ? s->start_s : from_s;
	int64_t b = s->end_s < to_s ? s->end_s : to_s;

	int64_t seconds = b > a ? (b - a) * (s->gpus > 1 ? s->gpus : 1) * (s->hosts > 1 ? s->hosts : 1)
				: 0;

	if (s->kind != RUNTIME_GPU || s->fraction_milli == 0 || s->fraction_milli >= 1000)
		return seconds;
	return seconds * s->fraction_milli / 1000;
}

int64_t ledger_window_sum_s(const struct ledger_span *spans, size_t n, enum runtime_kind kind,
			    int64_t from_s, int64_t to_s)
{
	int64_t sum = 0;

	for (size_t i = 0; i < n; i++)
		if (spans[i].kind == kind)
			sum += ledger_clip_s(&spans[i], from_s, to_s);
	return sum;
}

int64_t ledger_window_free_at(const struct ledger_span *spans, size_t n, enum runtime_kind kind,
			      int64_t window_s, int64_t limit_s, int64_t need_s, int64_t now_s)
{
	int64_t lo = now_s, hi = now_s + window_s;

	if (window_s < 1 || need_s < 1)
		return -EINVAL;
	if (need_s > limit_s)
		return -ERANGE;
	/* With no new use the window's sum never grows as t moves on, and it is
	 * 0 once the window starts at now_s; so binary search on whole seconds
	 * for the first t where enough is free. */
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;
		if (ledger_window_sum_s(spans, n, kind, mid - window_s, mid) + need_s <= limit_s)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}
