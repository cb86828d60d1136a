/* Unit tests: the ticker (common/ticker.c): the first pass at once, a poke
 * wakes an idle ticker, TICKER_IDLE sleeps with no pass at all, due times
 * are honoured (not early, not much late), pokes during a pass fold into one
 * more pass, and stop joins (no pass after it returns). */
#include "unit.h"

#include <pthread.h>
#include <time.h>

#include "labd/clock.h"
#include "labd/ticker.h"

struct probe {
	pthread_mutex_t lock;
	int passes;
	long long at[64];     /* clock_ms() of each pass */
	long long period_ms;  /* > 0: due again after this; else TICKER_IDLE */
	int slow_ms;          /* a pass takes this long */
	struct ticker *self;  /* poked from inside the pass (once) when set */
};

static long long pass(void *ctx)
{
	struct probe *p = ctx;
	long long now = clock_ms();

	pthread_mutex_lock(&p->lock);
	if (p->passes < 64)
		p->at[p->passes] = now;
	p->passes++;
	long long period = p->period_ms;
	int slow = p->slow_ms;
	pthread_mutex_unlock(&p->lock);
	if (slow)
		usleep((useconds_t)slow * 1000);
	return period > 0 ? now + period : TICKER_IDLE;
}

static int passes(struct probe *p)
{
	pthread_mutex_lock(&p->lock);
	int n = p->passes;
	pthread_mutex_unlock(&p->lock);
	return n;
}

static void sleep_ms(int ms)
{
	usleep((useconds_t)ms * 1000);
}

/* Waits up to ms for at least n passes; the count then. */
static int wait_passes(struct probe *p, int n, int ms)
{
	for (int i = 0; i < ms && passes(p) < n; i++)
		sleep_ms(1);
	return passes(p);
}

static void test_idle_sleeps_until_poked(void **state)
{
	struct probe p = {.lock = PTHREAD_MUTEX_INITIALIZER};
	struct ticker *t;

	(void)state;
	assert_int_equal(ticker_start("t-idle", pass, &p, &t), 0);
	assert_int_equal(wait_passes(&p, 1, 1000), 1); /* the first pass, at once */
	sleep_ms(300);
	assert_int_equal(passes(&p), 1); /* TICKER_IDLE: no pass without a poke */
	long long poked = clock_ms();
	ticker_poke(t);
	assert_int_equal(wait_passes(&p, 2, 1000), 2);
	assert_true(p.at[1] - poked < 50);
	sleep_ms(200);
	assert_int_equal(passes(&p), 2);
	ticker_stop(t);
}

static void test_due_times_are_honoured(void **state)
{
	struct probe p = {.lock = PTHREAD_MUTEX_INITIALIZER, .period_ms = 100};
	struct ticker *t;

	(void)state;
	assert_int_equal(ticker_start("t-due", pass, &p, &t), 0);
	assert_true(wait_passes(&p, 5, 2000) >= 5);
	ticker_stop(t);
	for (int i = 1; i < 5; i++) {
		long long gap = p.at[i] - p.at[i - 1];
		assert_true(gap >= 100); /* never early */
		assert_true(gap < 180);  /* nor much late */
	}
}

static void test_pokes_during_a_pass_fold_into_one(void **state)
{
	struct probe p = {.lock = PTHREAD_MUTEX_INITIALIZER, .slow_ms = 200};
	struct ticker *t;

	(void)state;
	assert_int_equal(ticker_start("t-fold", pass, &p, &t), 0);
	assert_int_equal(wait_passes(&p, 1, 1000), 1);
	for (int i = 0; i < 10; i++) /* while the first pass still runs */
		ticker_poke(t);
	sleep_ms(800);
	assert_int_equal(passes(&p), 2); /* one more pass, not ten, and none lost */
	ticker_stop(t);
}

static void test_stop_joins(void **state)
{
	struct probe p = {.lock = PTHREAD_MUTEX_INITIALIZER, .period_ms = 5, .slow_ms = 20};
	struct ticker *t;

	(void)state;
	assert_int_equal(ticker_start("t-stop", pass, &p, &t), 0);
	assert_true(wait_passes(&p, 3, 2000) >= 3);
	ticker_stop(t); /* waits for the pass in flight */
	int n = passes(&p);
	sleep_ms(100);
	assert_int_equal(passes(&p), n);
	ticker_poke(NULL);
	ticker_stop(NULL);
}

static void test_stop_wakes_an_idle_ticker(void **state)
{
	struct probe p = {.lock = PTHREAD_MUTEX_INITIALIZER};
	struct ticker *t;

	(void)state;
	assert_int_equal(ticker_start("t-stop-idle", pass, &p, &t), 0);
	assert_int_equal(wait_passes(&p, 1, 1000), 1);
	long long before = clock_ms();
	ticker_stop(t);
	assert_true(clock_ms() - before < 100);
}

static void test_clock(void **state)
{
	struct timespec ts, now;

	(void)state;
	assert_true(clock_wall_ms() / 1000 - time(NULL) <= 1);
	clock_deadline(&ts, 1500);
	clock_gettime(CLOCK_MONOTONIC, &now);
	long long ms = (ts.tv_sec - now.tv_sec) * 1000 + (ts.tv_nsec - now.tv_nsec) / 1000000;
	assert_true(ms > 1400 && ms <= 1500);
	assert_true(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000L);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idle_sleeps_until_poked),
		cmocka_unit_test(test_due_times_are_honoured),
		cmocka_unit_test(test_pokes_during_a_pass_fold_into_one),
		cmocka_unit_test(test_stop_joins),
		cmocka_unit_test(test_stop_wakes_an_idle_ticker),
		cmocka_unit_test(test_clock),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
