/* buf.h - the one growable byte buffer, with a hard maximum (after curl's dynbuf).
 *
 * The maximum is given at init and never passed: an add that would go over it
 * fails with -EMSGSIZE and leaves the content as it was, so a caller that holds
 * untrusted bytes (request bodies, heads, log lines) cannot be made to grow
 * without bound. Every function returns 0 or a negative errno.
 *
 *     struct buf b;
 *     buf_init(&b, 64 * 1024);
 *     if ((rc = buf_add(&b, data, len)) < 0)   // -EMSGSIZE at the limit, -ENOMEM
 *             goto out;
 *     ...
 * out:
 *     buf_release(&b);
 */
#ifndef LABD_BUF_H
#define LABD_BUF_H

#include <stddef.h>

struct buf {
	char *data;       /* owned; NUL-terminated, or NULL while nothing was added */
	size_t len;       /* bytes held, not counting the NUL */
	size_t alloc;     /* bytes allocated at data */
	size_t max_bytes; /* len never exceeds this */
};

/* An empty buffer that will hold at most max_bytes; allocates nothing. A zeroed
 * struct buf is an empty buffer with a maximum of 0. */
void buf_init(struct buf *b, size_t max_bytes);
/* Frees the memory; b is empty again with the same maximum, ready for reuse. */
void buf_release(struct buf *b);
/* Empties b but keeps its memory for the next adds. */
void buf_clear(struct buf *b);
/* Appends len bytes (a NUL follows them). 0; -EMSGSIZE when len + the bytes
 * held would pass the maximum, -ENOMEM; on failure b is unchanged. */
int buf_add(struct buf *b, const void *data, size_t len);
/* Appends printf-formatted text; the same results as buf_add (-EINVAL on a bad format). */
int buf_addf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Removes the first n bytes (all of them when n >= len), keeping the memory:
 * a queue drained from the front (a stream's unsent bytes). */
void buf_drop(struct buf *b, size_t n);
/* The content as a string: "" while nothing was added. Borrowed until the next change. */
const char *buf_str(const struct buf *b);

#endif
