/* fail.c - failures held for the step runner, or logged; see fail.h. */
#include "sandbox/fail.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "labd/log.h"

/* The active hold, if any (sandbox_start between fail_hold and fail_release). */
static struct {
	char *buf;
	size_t size;
	int held;
} hold;

static int report(const char *suffix, const char *fmt, va_list ap)
{
	char line[1024];
	int n = vsnprintf(line, sizeof(line), fmt, ap);

	if (n >= 0 && suffix && (size_t)n < sizeof(line))
		snprintf(line + n, sizeof(line) - (size_t)n, ": %s", suffix);
	if (hold.buf && !hold.held) {
		snprintf(hold.buf, hold.size, "%s", line);
		hold.held = 1;
		return -1;
	}
	return log_error("%s", line);
}

int fail_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report(NULL, fmt, ap);
	va_end(ap);
	return -1;
}

int fail_errno(const char *fmt, ...)
{
	int saved = errno;
	char ebuf[256];
	const char *msg = strerror_r(saved, ebuf, sizeof(ebuf));
	va_list ap;

	va_start(ap, fmt);
	report(msg, fmt, ap);
	va_end(ap);
	errno = saved;
	return -1;
}

void fail_hold(char *buf, size_t size)
{
	hold.buf = buf;
	hold.size = size;
	hold.held = 0;
	if (size)
		buf[0] = '\0';
}

int fail_release(void)
{
	int held = hold.held;

	hold.buf = NULL;
	hold.size = 0;
	hold.held = 0;
	return held;
}
