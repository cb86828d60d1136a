/* ticker.h - a thread that runs one pass of timed work when it is due, and
 * sleeps, untimed, while nothing is (redis's serverCron, with the period
 * replaced by the pass's own next due time).
 *
 * The pass returns when it wants to run again: a time of clock_ms()
 * (CLOCK_MONOTONIC, labd/clock.h), or TICKER_IDLE to sleep until poked. A
 * due time already past runs the pass again at once. ticker_poke asks for a
 * pass soon from any thread (pokes while a pass runs fold into one more
 * pass after it), so whatever makes work due (a submit, a backend event, a
 * stop) pokes, and an idle process has no timer left to wake it.
 *
 *   static long long pass(void *ctx) { ...; return busy ? clock_ms() + 250 : TICKER_IDLE; }
 *   struct ticker *t;
 *   if (ticker_start("jobs", pass, ctx, &t) < 0) ...
 *   ticker_poke(t);          any thread, NULL ignored
 *   ticker_stop(t);          the pass in flight ends first; then joined and freed
 *
 * The first pass runs at once. The pass runs on the ticker's thread only,
 * never twice at a time, and never after ticker_stop returned. */
#ifndef LABD_TICKER_H
#define LABD_TICKER_H

#define TICKER_IDLE (-1LL)
/* Longest thread name Linux keeps (16 bytes with the NUL). */
#define TICKER_NAME_MAX 15

struct ticker;

typedef long long (*ticker_pass_fn)(void *ctx);

/* Starts the thread (named name, truncated to TICKER_NAME_MAX) whose first
 * pass runs at once. 0 with *out, or a negative errno (logged). */
int ticker_start(const char *name, ticker_pass_fn pass, void *ctx, struct ticker **out);
/* A pass soon (any thread, the pass's own included; NULL ignored). */
void ticker_poke(struct ticker *t);
/* Stops the thread after the pass in flight, joins and frees it (NULL ignored). */
void ticker_stop(struct ticker *t);

#endif
