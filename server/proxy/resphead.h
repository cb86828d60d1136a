/* resphead.h - the response head the proxy collects from Jupyter, header by
 * header as http_parser hands over the pieces of each name and value. What
 * arrives is not trusted (the user's code can answer on the runtime's
 * socket), so it is bounded and walked only within what was written. Pure:
 * the fuzz harness drives it without a socket. */
#ifndef LABD_RESPHEAD_H
#define LABD_RESPHEAD_H

#include <stdbool.h>
#include <stddef.h>

/* At most this many bytes of "name\0value\0" pairs. */
#define RESPHEAD_MAX (64 * 1024)

struct resphead {
	char *buf; /* RESPHEAD_MAX bytes, the caller's */
	size_t len;
	bool last_was_value;
	/* http_parser goes on to a second response in the same bytes: its
	 * headers are refused, not added to (and out of step with) the first's */
	bool ended;
};

/* Empties h over buf (RESPHEAD_MAX bytes). */
void resphead_init(struct resphead *h, char *buf);
/* A piece of a header's name or value (http_parser's callbacks); 0, or -1
 * when the head would outgrow RESPHEAD_MAX, the piece holds a NUL or the
 * head has ended. */
int resphead_field(struct resphead *h, const char *at, size_t len);
int resphead_value(struct resphead *h, const char *at, size_t len);
/* The head is complete. */
void resphead_end(struct resphead *h);
/* Walks the pairs from *off (0 first): the next name, its value in *value,
 * or NULL at the end. */
const char *resphead_next(const struct resphead *h, size_t *off, const char **value);
/* The first header called name (any case), or NULL. */
const char *resphead_get(const struct resphead *h, const char *name);

#endif
