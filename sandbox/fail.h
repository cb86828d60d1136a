/* fail.h - how sandbox/ modules report a failure, so that the step it broke can be named.
 *
 * Modules in sandbox/ say what failed with fail_error()/fail_errno() (same words as
 * log_error()/log_errno(), which they are outside a start: labbox home, gc, teardown).
 * While sandbox_start() runs its steps it holds the first failure's text instead
 * (fail_hold), and its step runner logs it once as "sandbox <id>: step <name>: <text>"
 * and hands it to the caller in struct sandbox_error.  Passing a message buffer through
 * every helper of home.c and cgbox.c would say the same with far more code; like the
 * rest of libsandbox this is not thread-safe (one hold at a time).
 */
#ifndef LABD_SANDBOX_FAIL_H
#define LABD_SANDBOX_FAIL_H

#include <stddef.h>

/* Reports a failure: held if a hold is active and nothing is held yet, else logged.
 * Both return -1; fail_errno appends ": strerror(errno)" and preserves errno. */
int fail_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int fail_errno(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Starts holding the first failure in buf (size bytes, emptied now; borrowed until
 * fail_release).  Later failures while one is held are logged as usual. */
void fail_hold(char *buf, size_t size);
/* Stops holding; returns whether a failure was held. */
int fail_release(void);

#endif
