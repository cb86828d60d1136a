/* resphead.c - see resphead.h. */
#include "proxy/resphead.h"

#include <string.h>
#include <strings.h>

void resphead_init(struct resphead *h, char *buf)
{
	h->buf = buf;
	h->len = 0;
	h->last_was_value = false;
	h->ended = false;
}

/* A NUL inside a name or value would end it early in the pairs, so the walk
 * would take the rest for more pairs and read past what was written (RFC
 * 9110 forbids NUL in a field; http_parser lets it through). */
static bool has_nul(const char *at, size_t len)
{
	return memchr(at, '\0', len) != NULL;
}

int resphead_field(struct resphead *h, const char *at, size_t len)
{
	if (h->ended || has_nul(at, len))
		return -1;
	if (h->last_was_value || h->len == 0) {
		if (h->len && h->len + 1 > RESPHEAD_MAX)
			return -1;
		if (h->len)
			h->buf[h->len++] = '\0'; /* end the previous value */
		h->last_was_value = false;
	}
	if (h->len + len + 2 > RESPHEAD_MAX)
		return -1;
	memcpy(h->buf + h->len, at, len);
	h->len += len;
	return 0;
}

int resphead_value(struct resphead *h, const char *at, size_t len)
{
	if (h->ended || has_nul(at, len))
		return -1;
	if (!h->last_was_value) {
		h->buf[h->len++] = '\0'; /* end the name */
		h->last_was_value = true;
	}
	if (h->len + len + 2 > RESPHEAD_MAX)
		return -1;
	memcpy(h->buf + h->len, at, len);
	h->len += len;
	return 0;
}

void resphead_end(struct resphead *h)
{
	if (h->len && !h->ended)
		h->buf[h->len++] = '\0';
	h->ended = true;
}

const char *resphead_next(const struct resphead *h, size_t *off, const char **value)
{
	if (*off >= h->len)
		return NULL;
	const char *name = h->buf + *off;
	*value = name + strlen(name) + 1;
	*off = (size_t)(*value - h->buf) + strlen(*value) + 1;
	return name;
}

const char *resphead_get(const struct resphead *h, const char *name)
{
	const char *n, *v;
	size_t off = 0;

	while ((n = resphead_next(h, &off, &v)))
		if (!strcasecmp(n, name))
			return v;
	return NULL;
}
