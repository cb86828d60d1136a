/* str.h - a bounded string copy, for the request path's fixed-size fields, and a
 * length cut on a UTF-8 boundary.
 *
 * snprintf(dst, n, "%s", src) does the same through the whole printf
 * machinery (a few hundred ns); the proxy copies a handful of names and
 * paths per request, so this is the one copy that truncates safely.
 *
 *     if (str_copy(target.owner, sizeof(target.owner), user) < 0)
 *             return -ENAMETOOLONG;   // or accept the truncated copy
 */
#ifndef LABD_STR_H
#define LABD_STR_H

#include <stddef.h>

/* Copies src into dst (dstlen > 0 bytes), always NUL-terminated: the length
 * copied, or -ENAMETOOLONG when src was cut to fit. */
int str_copy(char *dst, size_t dstlen, const char *src);
/* The length of s cut to at most max bytes, never inside a UTF-8 sequence: half a
 * character is no JSON text (json_pack refuses it, and a message without its fields
 * ends the supervisor channel). Use as "%.*s" or json_pack's "s%". */
size_t str_utf8_len(const char *s, size_t max);

#endif
