/* buf.c - bounded growable buffer; see include/labd/buf.h. */
#include "labd/buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_MIN_ALLOC 256

void buf_init(struct buf *b, size_t max_bytes)
{
	b->data = NULL;
	b->len = b->alloc = 0;
	b->max_bytes = max_bytes;
}

void buf_release(struct buf *b)
{
	free(b->data);
	buf_init(b, b->max_bytes);
}

void buf_clear(struct buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

/* Makes room for len more bytes and the NUL: doubling, but never allocating
 * more than the maximum and its NUL need. */
static int grow(struct buf *b, size_t len)
{
	size_t limit = b->max_bytes < SIZE_MAX ? b->max_bytes + 1 : SIZE_MAX;
	size_t need, cap;
	char *grown;

	if (len > b->max_bytes - b->len)
		return -EMSGSIZE;
	need = b->len + len + 1;
	if (need <= b->alloc)
		return 0;
	cap = b->alloc ? b->alloc : BUF_MIN_ALLOC;
	while (cap < need)
		cap = cap > limit / 2 ? limit : cap * 2;
	if (cap > limit)
		cap = limit;
	grown = realloc(b->data, cap);
	if (!grown)
		return -ENOMEM;
	b->data = grown;
	b->alloc = cap;
	return 0;
}

int buf_add(struct buf *b, const void *data, size_t len)
{
	int rc = grow(b, len);

	if (rc < 0)
		return rc;
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

int buf_addf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n, rc;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((rc = grow(b, (size_t)n)) < 0)
		return rc;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, b->alloc - b->len, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

void buf_drop(struct buf *b, size_t n)
{
	if (n >= b->len) {
		buf_clear(b);
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
	b->data[b->len] = '\0';
}

const char *buf_str(const struct buf *b)
{
	return b->data ? b->data : "";
}
