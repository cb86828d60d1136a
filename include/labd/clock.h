/* clock.h - monotonic time for deadlines and timers (not wall time). */
#ifndef LABD_CLOCK_H
#define LABD_CLOCK_H

/* CLOCK_MONOTONIC in milliseconds: unaffected by changes of the wall clock. */
long long clock_ms(void);
/* The same in nanoseconds, for measuring short spans. */
long long clock_ns(void);

#endif
