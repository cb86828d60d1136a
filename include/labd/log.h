/* log.h - the one logging and error helper shared by every labd module.
 *
 * Messages say what failed and on what, lowercase, no full stop:
 *     return log_errno("open %s", path);     -> "labd: error: open /x: No such file..."
 * log_error()/log_errno() return -1 so a failing step can `return log_error(...)`.
 * Thread-safe: each message is written with a single write(2).
 */
#ifndef LABD_LOG_H
#define LABD_LOG_H

#include <stdarg.h>

enum log_level { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARN, LOG_LEVEL_ERROR };

/* Sets the program tag printed before each message ("labd", "labd-web", "labbox").
 * The string is borrowed and must outlive all logging. */
void log_set_tag(const char *tag);
/* Messages below this level are dropped. Default: LOG_LEVEL_INFO. */
void log_set_level(enum log_level level);
/* Parses "debug", "info", "warn" or "error"; returns 0, or -1 on an unknown name. */
int log_level_parse(const char *name, enum log_level *out);

void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Both return -1. log_errno appends ": strerror(errno)" and preserves errno. */
int log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int log_errno(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* For short-lived helpers only (a sandbox child before exec): logs and _exit(127). */
_Noreturn void log_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
