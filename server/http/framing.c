/* framing.c - see framing.h. */
#include "http/framing.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

struct framing {
	const char *length;  /* the first Content-Length seen */
	bool lengths_differ; /* a later one is not the same */
	bool length_bad;     /* not 1*DIGIT (a list, a sign, a folded line) */
	unsigned encodings;  /* Transfer-Encoding headers */
	bool plain_chunked;  /* the only one is exactly "chunked" */
};

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
				     const char *value)
{
	struct framing *f = cls;
	(void)kind;

	if (!strcasecmp(key, "Content-Length")) {
		f->length_bad = f->length_bad || !value[0] || value[strspn(value, "0123456789")];
		if (!f->length)
			f->length = value;
		else if (strcmp(f->length, value) != 0)
			f->lengths_differ = true;
	} else if (!strcasecmp(key, "Transfer-Encoding")) {
		f->encodings++;
		f->plain_chunked = !strcasecmp(value, "chunked");
	}
	return MHD_YES;
}

int http_framing_check(struct MHD_Connection *conn, char *why, size_t whylen)
{
	struct framing f = {0};

	MHD_get_connection_values(conn, MHD_HEADER_KIND, count_framing, &f);
	if (f.length_bad)
		snprintf(why, whylen, "Content-Length must be one decimal number");
	else if (f.lengths_differ)
		snprintf(why, whylen, "Content-Length is given more than once with different values");
	else if (f.length && f.encodings)
		snprintf(why, whylen, "both Content-Length and Transfer-Encoding are given");
	else if (f.encodings > 1 || (f.encodings && !f.plain_chunked))
		snprintf(why, whylen, "Transfer-Encoding must be exactly \"chunked\"");
	else
		return 0;
	return -1;
}
