/* log.c - leveled logging to stderr; see include/labd/log.h. */
#include "labd/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const char *log_tag = "labd";
static enum log_level log_min = LOG_LEVEL_INFO;

void log_set_tag(const char *tag) { log_tag = tag; }
void log_set_level(enum log_level level) { log_min = level; }

int log_level_parse(const char *name, enum log_level *out)
{
	static const char *const names[] = {"debug", "info", "warn", "error"};
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcasecmp(name, names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -1;
}

static void log_write(enum log_level level, const char *suffix, const char *fmt, va_list ap)
{
	static const char *const labels[] = {"debug", "info", "warning", "error"};
	char line[2048];
	int n;
	size_t len;

	if (level < log_min)
		return;
	n = snprintf(line, sizeof(line), "%s: %s: ", log_tag, labels[level]);
	len = n > 0 ? (size_t)n : 0;
	if (len < sizeof(line)) {
		n = vsnprintf(line + len, sizeof(line) - len, fmt, ap);
		len += n > 0 ? (size_t)n : 0;
	}
	if (suffix && len < sizeof(line)) {
		n = snprintf(line + len, sizeof(line) - len, ": %s", suffix);
		len += n > 0 ? (size_t)n : 0;
	}
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2; /* truncated: still end the line */
	line[len++] = '\n';
	/* One write(2) per message keeps lines from threads whole. */
	if (write(STDERR_FILENO, line, len) < 0)
		return;
}

#define LOG_BODY(level, suffix)                                                                    \
	do {                                                                                       \
		va_list ap;                                                                        \
		va_start(ap, fmt);                                                                 \
		log_write(level, suffix, fmt, ap);                                                 \
		va_end(ap);                                                                        \
	} while (0)

void log_debug(const char *fmt, ...) { LOG_BODY(LOG_LEVEL_DEBUG, NULL); }
void log_info(const char *fmt, ...) { LOG_BODY(LOG_LEVEL_INFO, NULL); }
void log_warn(const char *fmt, ...) { LOG_BODY(LOG_LEVEL_WARN, NULL); }

int log_error(const char *fmt, ...)
{
	LOG_BODY(LOG_LEVEL_ERROR, NULL);
	return -1;
}

int log_errno(const char *fmt, ...)
{
	int saved = errno;
	char buf[256];
	const char *msg = strerror_r(saved, buf, sizeof(buf));
	LOG_BODY(LOG_LEVEL_ERROR, msg);
	errno = saved;
	return -1;
}

_Noreturn void log_die(const char *fmt, ...)
{
	LOG_BODY(LOG_LEVEL_ERROR, NULL);
	_exit(127);
}
