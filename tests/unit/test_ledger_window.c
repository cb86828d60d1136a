/* Unit tests of the rolling-window arithmetic (store/ledger_window.c): sums
 * at the window's edges and the time the next seconds free up. */
#include "unit.h"

#include <errno.h>

#include "store/ledger_window.h"

static const struct ledger_span spans[] = {
	{100, 200, RUNTIME_CPU, 0, 0, 0}, /* 100 s */
	{150, 160, RUNTIME_GPU, 0, 0, 0}, /* 10 s, another kind */
	{300, 350, RUNTIME_CPU, 0, 0, 0}, /* 50 s */
};
#define N (sizeof(spans) / sizeof(spans[0]))

static void test_clip_edges(void **state)
{
	(void)state;
	const struct ledger_span s = {100, 200, RUNTIME_CPU, 0, 0, 0};
	assert_int_equal(ledger_clip_s(&s, 0, 1000), 100);  /* inside */
	assert_int_equal(ledger_clip_s(&s, 100, 200), 100); /* exactly the window */
	assert_int_equal(ledger_clip_s(&s, 150, 1000), 50); /* straddles from */
	assert_int_equal(ledger_clip_s(&s, 0, 150), 50);    /* straddles to */
	assert_int_equal(ledger_clip_s(&s, 120, 130), 10);  /* window inside the span */
	assert_int_equal(ledger_clip_s(&s, 200, 300), 0);   /* starts at its end: [from, to) */
	assert_int_equal(ledger_clip_s(&s, 0, 100), 0);     /* ends at its start */
	assert_int_equal(ledger_clip_s(&s, 199, 200), 1);   /* its last second */
	assert_int_equal(ledger_clip_s(&s, 100, 101), 1);   /* its first second */
	const struct ledger_span empty = {100, 100, RUNTIME_CPU, 0, 0, 0};
	assert_int_equal(ledger_clip_s(&empty, 0, 1000), 0);
}

static void test_sum_by_kind_and_window(void **state)
{
	(void)state;
	assert_int_equal(ledger_window_sum_s(spans, N, RUNTIME_CPU, 0, 1000), 150);
	assert_int_equal(ledger_window_sum_s(spans, N, RUNTIME_GPU, 0, 1000), 10);
	assert_int_equal(ledger_window_sum_s(spans, N, RUNTIME_CPU, 150, 325), 50 + 25);
	assert_int_equal(ledger_window_sum_s(spans, N, RUNTIME_GPU, 155, 325), 5);
	assert_int_equal(ledger_window_sum_s(spans, N, RUNTIME_CPU, 200, 300), 0);
	/* adjacent windows add up to the whole: nothing is counted twice or lost */
	for (int64_t cut = 0; cut <= 400; cut += 7)
		assert_int_equal(ledger_window_sum_s(spans, N, RUNTIME_CPU, 0, cut) +
					 ledger_window_sum_s(spans, N, RUNTIME_CPU, cut, 400),
				 150);
	assert_int_equal(ledger_window_sum_s(NULL, 0, RUNTIME_CPU, 0, 1000), 0);
}

static void test_free_at(void **state)
{
	(void)state;
	/* window 1000 s, limit 160 s of cpu, now 400: 150 s used, 10 free */
	assert_int_equal(ledger_window_free_at(spans, N, RUNTIME_CPU, 1000, 160, 10, 400), 400);
	/* 20 s need 10 more to leave the window: the first span's second 10
	 * (t - 1000 = 110) is when [t - 1000, t) holds 140 s */
	assert_int_equal(ledger_window_free_at(spans, N, RUNTIME_CPU, 1000, 160, 20, 400), 1110);
	/* one second earlier is not enough */
	assert_int_equal(ledger_window_sum_s(spans, N, RUNTIME_CPU, 1109 - 1000, 1109) + 20 > 160,
			 1);
	/* everything: once the last span leaves the window */
	assert_int_equal(ledger_window_free_at(spans, N, RUNTIME_CPU, 1000, 160, 160, 400), 1350);
	/* the other kind is not counted */
	assert_int_equal(ledger_window_free_at(spans, N, RUNTIME_GPU, 1000, 10, 10, 400), 1160);
	assert_int_equal(ledger_window_free_at(spans, N, RUNTIME_GPU, 1000, 100, 90, 400), 400);
	assert_int_equal(ledger_window_free_at(spans, N, RUNTIME_CPU, 1000, 160, 161, 400), -ERANGE);
	assert_int_equal(ledger_window_free_at(spans, N, RUNTIME_CPU, 0, 160, 1, 400), -EINVAL);
	assert_int_equal(ledger_window_free_at(spans, N, RUNTIME_CPU, 1000, 160, 0, 400), -EINVAL);
}

/* A span of several GPUs counts each second once per GPU: quotas, the usage
 * views and the GPU queue's order weigh a 2-GPU job twice. */
static void test_gpus_weigh(void **state)
{
	(void)state;
	const struct ledger_span two = {100, 200, RUNTIME_GPU, 2, 0, 0}, one = {100, 200, RUNTIME_GPU, 1, 0, 0};
	const struct ledger_span both[] = {two, one};
	assert_int_equal(ledger_clip_s(&two, 0, 1000), 200);
	assert_int_equal(ledger_clip_s(&two, 150, 160), 20);
	assert_int_equal(ledger_clip_s(&one, 0, 1000), 100);
	assert_int_equal(ledger_window_sum_s(both, 2, RUNTIME_GPU, 0, 1000), 300);
	/* 300 used of a 300 s limit: 10 free once 4 s of both spans (3 each) left the window */
	assert_int_equal(ledger_window_free_at(both, 2, RUNTIME_GPU, 1000, 300, 10, 400), 1104);
}

/* A job on several hosts (schema 21) counts each second once per host, in the
 * quota windows as in the bill; with its GPUs too; 0 and 1 are one host. */
static void test_hosts_weigh(void **state)
{
	(void)state;
	const struct ledger_span two = {100, 200, RUNTIME_CPU, 0, 0, 2},
				 one = {100, 200, RUNTIME_CPU, 0, 0, 1},
				 gpus = {100, 200, RUNTIME_GPU, 2, 1000, 3};
	const struct ledger_span both[] = {two, one};
	assert_int_equal(ledger_clip_s(&two, 0, 1000), 200);
	assert_int_equal(ledger_clip_s(&two, 150, 160), 20);
	assert_int_equal(ledger_clip_s(&one, 0, 1000), 100);
	assert_int_equal(ledger_clip_s(&gpus, 0, 1000), 600);
	assert_int_equal(ledger_window_sum_s(both, 2, RUNTIME_CPU, 0, 1000), 300);
}

/* A GPU span of a slice counts its fraction of a card (thousandths), rounded
 * down per span: a quarter share's 100 s on one device is 25 card-seconds, a
 * 1g.18gb instance (18/141 of an H200 is 127) 12 of 100; a CPU span ignores
 * the field; 0 and 1000 are a whole card. */
static void test_fraction_weighs(void **state)
{
	(void)state;
	const struct ledger_span share = {100, 200, RUNTIME_GPU, 1, 250, 0},
				 mig = {100, 200, RUNTIME_GPU, 1, 127, 0},
				 two = {100, 200, RUNTIME_GPU, 2, 250, 0},
				 whole = {100, 200, RUNTIME_GPU, 1, 1000, 0},
				 unset = {100, 200, RUNTIME_GPU, 1, 0, 0},
				 cpu = {100, 200, RUNTIME_CPU, 0, 250, 0};
	const struct ledger_span all[] = {share, mig, whole};
	assert_int_equal(ledger_clip_s(&share, 0, 1000), 25);
	assert_int_equal(ledger_clip_s(&share, 150, 1000), 12); /* 50 s * 0.25, down */
	assert_int_equal(ledger_clip_s(&mig, 0, 1000), 12);
	assert_int_equal(ledger_clip_s(&two, 0, 1000), 50);
	assert_int_equal(ledger_clip_s(&whole, 0, 1000), 100);
	assert_int_equal(ledger_clip_s(&unset, 0, 1000), 100);
	assert_int_equal(ledger_clip_s(&cpu, 0, 1000), 100);
	assert_int_equal(ledger_window_sum_s(all, 3, RUNTIME_GPU, 0, 1000), 25 + 12 + 100);
	/* a 30 s limit: the share's 25 and 5 more fit now */
	assert_int_equal(ledger_window_free_at(&share, 1, RUNTIME_GPU, 1000, 30, 5, 400), 400);
	/* 10 need the share's charge down to 20: 83 wall seconds left in the
	 * window charge 20 (20.75, rounded down), 84 charge 21 */
	assert_int_equal(ledger_window_free_at(&share, 1, RUNTIME_GPU, 1000, 30, 10, 400), 1117);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clip_edges),
		cmocka_unit_test(test_gpus_weigh),
		cmocka_unit_test(test_hosts_weigh),
		cmocka_unit_test(test_fraction_weighs),
		cmocka_unit_test(test_sum_by_kind_and_window),
		cmocka_unit_test(test_free_at),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
