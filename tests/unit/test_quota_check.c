/* Unit tests of the quota policy (sched/quota_check.c): a window's use,
 * remainder and next free time at the edges of the rolling window, the
 * "used up" rule (less than a minute left), the start verdict, the deadline
 * as the earlier of the plan's length and the quota left, and the machine
 * caps root puts on a runtime's sizes (supervisor/sizecap.c). */
#include "unit.h"

#include <errno.h>
#include <string.h>

#include "config/config.h"
#include "sched/quota_check.h"
#include "supervisor/sizecap.h"

#define DAY 86400
#define NOW (100 * DAY)

/* 4 h of gpu ending 2 h ago that started 6 h ago, 1 h of cpu a day ago */
static const struct ledger_span spans[] = {
	{NOW - 6 * 3600, NOW - 2 * 3600, RUNTIME_GPU, 1, 0, 0},
	{NOW - DAY - 1800, NOW - DAY + 1800, RUNTIME_CPU, 0, 0, 0}, /* straddles the 24 h edge */
};
#define N (sizeof(spans) / sizeof(spans[0]))

static void test_window_use_and_edges(void **state)
{
	(void)state;
	struct quota_window w;

	assert_int_equal(quota_window_eval(spans, N, QL_GPU_S_PER_24H, 4 * 3600, NOW, &w), 0);
	assert_int_equal(w.used_s, 4 * 3600);
	assert_int_equal(w.remaining_s, 0);
	assert_true(quota_window_used_up(&w));
	/* 60 s free once the first minute of the span is out of the window */
	assert_int_equal(w.next_free_at, NOW - 6 * 3600 + DAY + 60);
	/* the cpu span is half inside the 24 h window, wholly inside 7 d */
	assert_int_equal(quota_window_eval(spans, N, QL_CPU_S_PER_24H, 3600, NOW, &w), 0);
	assert_int_equal(w.used_s, 1800);
	assert_int_equal(w.remaining_s, 1800);
	assert_false(quota_window_used_up(&w));
	/* not used up: when the next second beyond the remainder frees up, which
	 * is the next second of the span leaving the window: now + 1 */
	assert_int_equal(w.next_free_at, NOW + 1);
	assert_int_equal(quota_window_eval(spans, N, QL_CPU_S_PER_7D, 3600, NOW, &w), 0);
	assert_int_equal(w.used_s, 3600);
	assert_int_equal(w.next_free_at, NOW - DAY - 1800 + 7 * DAY + 60);
	/* unlimited: used is counted, nothing remains to compute */
	assert_int_equal(quota_window_eval(spans, N, QL_GPU_S_PER_7D, QUOTA_UNLIMITED, NOW, &w), 0);
	assert_int_equal(w.used_s, 4 * 3600);
	assert_int_equal(w.remaining_s, -1);
	assert_int_equal(w.next_free_at, 0);
	assert_false(quota_window_used_up(&w));
	/* no use: nothing to free */
	assert_int_equal(quota_window_eval(NULL, 0, QL_GPU_S_PER_24H, 100, NOW, &w), 0);
	assert_int_equal(w.remaining_s, 100);
	assert_int_equal(w.next_free_at, 0);
	/* not a window */
	assert_int_equal(quota_window_eval(spans, N, QL_MEMORY_BYTES, 1, NOW, &w), -EINVAL);
}

static void test_used_up_is_under_a_minute(void **state)
{
	(void)state;
	struct quota_window w;
	/* limit = use + 60: exactly a minute left is not used up; 59 s is */
	int64_t used = 4 * 3600;

	quota_window_eval(spans, N, QL_GPU_S_PER_24H, used + 60, NOW, &w);
	assert_int_equal(w.remaining_s, 60);
	assert_false(quota_window_used_up(&w));
	quota_window_eval(spans, N, QL_GPU_S_PER_24H, used + 59, NOW, &w);
	assert_int_equal(w.remaining_s, 59);
	assert_true(quota_window_used_up(&w));
	/* 1 s of the span must leave for 60 s to be free */
	assert_int_equal(w.next_free_at, NOW - 6 * 3600 + DAY + 1);
	/* a limit below a minute never frees up */
	quota_window_eval(spans, N, QL_GPU_S_PER_24H, 30, NOW, &w);
	assert_true(quota_window_used_up(&w));
	assert_int_equal(w.next_free_at, 0);
	/* the span's start leaves the window at its edge, not a second earlier:
	 * one second before the free time the window still holds too much */
	quota_window_eval(spans, N, QL_GPU_S_PER_24H, 4 * 3600, NOW, &w);
	assert_int_equal(ledger_window_sum_s(spans, N, RUNTIME_GPU, w.next_free_at - 1 - DAY,
					     w.next_free_at - 1),
			 4 * 3600 - 59);
	assert_int_equal(ledger_window_sum_s(spans, N, RUNTIME_GPU, w.next_free_at - DAY,
					     w.next_free_at),
			 4 * 3600 - 60);
}

static void status(struct quota_status *st, int64_t gpu_24h, int64_t gpu_7d, int64_t cpu_24h)
{
	memset(st, 0, sizeof(*st));
	st->now_s = NOW;
	for (int i = 0; i < QL_COUNT; i++)
		st->eff.v[i] = QUOTA_UNLIMITED;
	st->eff.v[QL_CPU_RUNTIME_MAX_S] = 12 * 3600;
	st->eff.v[QL_GPU_RUNTIME_MAX_S] = 4 * 3600;
	st->eff.v[QL_GPUS_PER_RUNTIME] = 1;
	st->eff.v[QL_GPU_S_PER_24H] = gpu_24h;
	st->eff.v[QL_GPU_S_PER_7D] = gpu_7d;
	st->eff.v[QL_CPU_S_PER_24H] = cpu_24h;
	for (int i = 0; i < QUOTA_WINDOWS; i++)
		quota_window_eval(spans, N, quota_window_limits[i],
				  st->eff.v[quota_window_limits[i]], NOW, &st->win[i]);
}

static void test_start_verdict_and_deadline(void **state)
{
	(void)state;
	struct quota_status st;
	struct quota_window why;
	int64_t deadline = 0;

	/* 10 min left of the 24 h gpu window: the deadline is 10 min out */
	status(&st, 4 * 3600 + 600, QUOTA_UNLIMITED, QUOTA_UNLIMITED);
	assert_int_equal(quota_check_start(&st, RUNTIME_GPU, &deadline, &why), QUOTA_START_ALLOWED);
	assert_int_equal(deadline, NOW + 600);
	/* plenty left: the plan's length */
	status(&st, 100 * 3600, QUOTA_UNLIMITED, QUOTA_UNLIMITED);
	quota_check_start(&st, RUNTIME_GPU, &deadline, &why);
	assert_int_equal(deadline, NOW + 4 * 3600);
	/* the cpu window bounds cpu runtimes only */
	status(&st, 4 * 3600, QUOTA_UNLIMITED, 1800 + 900);
	assert_int_equal(quota_check_start(&st, RUNTIME_CPU, &deadline, &why), QUOTA_START_ALLOWED);
	assert_int_equal(deadline, NOW + 900);
	/* gpu used up: refused, naming the window and when it frees up */
	assert_int_equal(quota_check_start(&st, RUNTIME_GPU, &deadline, &why), QUOTA_START_EXCEEDED);
	assert_int_equal(why.limit, QL_GPU_S_PER_24H);
	assert_int_equal(why.used_s, 4 * 3600);
	assert_int_equal(why.limit_s, 4 * 3600);
	/* both gpu windows used up: the one that frees up last is named */
	status(&st, 4 * 3600, 4 * 3600, QUOTA_UNLIMITED);
	assert_int_equal(quota_check_start(&st, RUNTIME_GPU, &deadline, &why), QUOTA_START_EXCEEDED);
	assert_int_equal(why.limit, QL_GPU_S_PER_7D);
	assert_int_equal(why.next_free_at, NOW - 6 * 3600 + 7 * DAY + 60);
	/* no GPUs per runtime */
	status(&st, QUOTA_UNLIMITED, QUOTA_UNLIMITED, QUOTA_UNLIMITED);
	st.eff.v[QL_GPUS_PER_RUNTIME] = 0;
	assert_int_equal(quota_check_start(&st, RUNTIME_GPU, &deadline, &why), QUOTA_START_NO_GPUS);
	assert_int_equal(quota_check_start(&st, RUNTIME_CPU, &deadline, &why), QUOTA_START_ALLOWED);
	st.eff.v[QL_GPUS_PER_RUNTIME] = 3;
	assert_int_equal(quota_gpus_per_runtime(&st), 3);
	/* an unlimited length is still a real deadline */
	st.eff.v[QL_CPU_RUNTIME_MAX_S] = QUOTA_UNLIMITED;
	quota_check_start(&st, RUNTIME_CPU, &deadline, &why);
	assert_int_equal(deadline, NOW + QUOTA_LONGEST_RUNTIME_S);
}

/* GPU windows count a slice's fraction of a card (docs/gpu.md): the same 4 h
 * on a quarter share use 1 h of a 2 h window, so a start is allowed with 1 h
 * left; on a 1g.18gb instance (127 thousandths) 30 min (1828.8 s, down). */
static void test_windows_charge_fractions(void **state)
{
	(void)state;
	const struct ledger_span share[] = {{NOW - 6 * 3600, NOW - 2 * 3600, RUNTIME_GPU, 1, 250, 0}},
				 mig[] = {{NOW - 6 * 3600, NOW - 2 * 3600, RUNTIME_GPU, 1, 127, 0}};
	struct quota_status st = {.now_s = NOW};
	struct quota_window why;
	int64_t deadline = 0;

	assert_int_equal(quota_window_eval(share, 1, QL_GPU_S_PER_24H, 2 * 3600, NOW, &st.win[2]), 0);
	assert_int_equal(st.win[2].used_s, 3600);
	assert_int_equal(st.win[2].remaining_s, 3600);
	assert_false(quota_window_used_up(&st.win[2]));
	assert_int_equal(quota_window_eval(mig, 1, QL_GPU_S_PER_24H, 2 * 3600, NOW, &st.win[2]), 0);
	assert_int_equal(st.win[2].used_s, 1828);
	/* a whole card's 4 h would have used the 2 h window up */
	for (int i = 0; i < QUOTA_WINDOWS; i++) {
		st.eff.v[quota_window_limits[i]] = quota_window_limits[i] == QL_GPU_S_PER_24H
							  ? 2 * 3600
							  : QUOTA_UNLIMITED;
		quota_window_eval(share, 1, quota_window_limits[i], st.eff.v[quota_window_limits[i]],
				  NOW, &st.win[i]);
	}
	st.eff.v[QL_GPU_RUNTIME_MAX_S] = QUOTA_UNLIMITED;
	st.eff.v[QL_GPUS_PER_RUNTIME] = 1;
	assert_int_equal(quota_check_start(&st, RUNTIME_GPU, &deadline, &why), QUOTA_START_ALLOWED);
	assert_int_equal(deadline, NOW + 3600);
	/* the hour left lasts four on a quarter share, eight on an eighth */
	assert_int_equal(quota_check_start_slice(&st, RUNTIME_GPU, 250, &deadline, &why),
			 QUOTA_START_ALLOWED);
	assert_int_equal(deadline, NOW + 4 * 3600);
	quota_check_start_slice(&st, RUNTIME_GPU, 125, &deadline, &why);
	assert_int_equal(deadline, NOW + 8 * 3600);
	quota_check_start_slice(&st, RUNTIME_GPU, 0, &deadline, &why); /* a whole card */
	assert_int_equal(deadline, NOW + 3600);
	/* the plan's length still bounds it */
	st.eff.v[QL_GPU_RUNTIME_MAX_S] = 2 * 3600;
	quota_check_start_slice(&st, RUNTIME_GPU, 250, &deadline, &why);
	assert_int_equal(deadline, NOW + 2 * 3600);
}

static void test_machine_caps(void **state)
{
	(void)state;
	struct labd_config cfg;
	struct sizecap_sizes s;
	char why[200];

	config_defaults(&cfg, false);
	cfg.memory_max_bytes = 8ULL << 30;
	cfg.cpus_max_milli = 4000;
	cfg.home_size_max_bytes = 100ULL << 30;
	/* 0 = the configured default */
	assert_int_equal(sizecap_apply(&cfg, 0, 0, 0, &s, why, sizeof(why)), 0);
	assert_true(s.memory_bytes == cfg.memory_bytes && s.cpus_milli == cfg.cpus_milli &&
		    s.home_size_bytes == cfg.home_size_bytes);
	/* at the cap is fine, above is refused naming the size and the key */
	assert_int_equal(sizecap_apply(&cfg, 8LL << 30, 4000, 100LL << 30, &s, why, sizeof(why)), 0);
	assert_true(s.memory_bytes == 8ULL << 30 && s.cpus_milli == 4000);
	assert_int_equal(sizecap_apply(&cfg, (8LL << 30) + 1, 0, 0, &s, why, sizeof(why)), -ERANGE);
	assert_non_null(strstr(why, "memory_max"));
	assert_int_equal(sizecap_apply(&cfg, 0, 4001, 0, &s, why, sizeof(why)), -ERANGE);
	assert_non_null(strstr(why, "cpus_max"));
	assert_int_equal(sizecap_apply(&cfg, 0, 0, 101LL << 30, &s, why, sizeof(why)), -ERANGE);
	assert_non_null(strstr(why, "home_size_max"));
	/* unset caps are the host's own memory and CPUs */
	cfg.memory_max_bytes = 0;
	cfg.cpus_max_milli = 0;
	sizecap_machine(&cfg, &s);
	assert_true(s.memory_bytes > 0 && s.cpus_milli >= 1000);
	assert_int_equal(sizecap_apply(&cfg, 0, s.cpus_milli + 1, 0, &s, why, sizeof(why)), -ERANGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_window_use_and_edges),
		cmocka_unit_test(test_used_up_is_under_a_minute),
		cmocka_unit_test(test_start_verdict_and_deadline),
		cmocka_unit_test(test_windows_charge_fractions),
		cmocka_unit_test(test_machine_caps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
