/* clock.h - time: the monotonic clock for deadlines, timers and timed waits,
 * and the wall clock for what is stored or shown. */
#ifndef LABD_CLOCK_H
#define LABD_CLOCK_H

#include <time.h>

/* CLOCK_MONOTONIC in milliseconds: unaffected by changes of the wall clock. */
long long clock_ms(void);
/* The same in nanoseconds, for measuring short spans. */
long long clock_ns(void);
/* The wall clock (CLOCK_REALTIME) in milliseconds since the epoch: for
 * timestamps that are stored or shown, never for a wait. */
long long clock_wall_ms(void);
/* The clock_ms() time at which the wall clock will read wall_ms (stored
 * times are wall-clock; timers wait on the monotonic clock). */
long long clock_ms_at(long long wall_ms);
/* *ts = CLOCK_MONOTONIC now + ms (ms <= 0: now), the absolute deadline of a
 * pthread_cond_timedwait on a condition variable whose clock is
 * CLOCK_MONOTONIC (pthread_condattr_setclock). */
void clock_deadline(struct timespec *ts, long long ms);

#endif
