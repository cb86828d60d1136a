/* scrub.h - removes a secret (Jupyter's token) from a byte stream that arrives
 * in pieces, including occurrences split across pieces; and decides which
 * upstream response headers never reach the browser. Pure logic. */
#ifndef LABD_SCRUB_H
#define LABD_SCRUB_H

#include <stdbool.h>
#include <stddef.h>

#define SCRUB_NEEDLE_MAX 64

struct scrub {
	char needle[SCRUB_NEEDLE_MAX + 1];
	size_t nlen;
	char carry[SCRUB_NEEDLE_MAX]; /* held-back tail that may start a match */
	size_t ncarry;
};

/* needle must be 1..SCRUB_NEEDLE_MAX bytes; returns -1 otherwise. */
int scrub_init(struct scrub *s, const char *needle);
/* Filters n bytes of in into out, which must hold n + SCRUB_NEEDLE_MAX bytes.
 * Holds back up to nlen-1 bytes unless final. Returns the bytes written. */
size_t scrub_feed(struct scrub *s, const char *in, size_t n, char *out, bool final);
/* Removes every occurrence of needle from the NUL-terminated text in place. */
void scrub_string(const char *needle, char *text);
/* True for an upstream response header labd drops: Set-Cookie of one of
 * labd's own cookie names (a runtime must not plant or clear labd's session
 * or runtime cookie), Service-Worker-Allowed (would widen a worker's scope)
 * and Clear-Site-Data (would wipe the origin's cookies and storage). */
bool scrub_header_dropped(const char *name, const char *value);

#endif
