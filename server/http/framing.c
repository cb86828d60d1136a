/* framing.c - see framing.h. */
#include "http/framing.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

void http_framing_header(struct http_framing *f, const char *key, const char *value)
{
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
}

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
				     const char *value)
{
	(void)kind;
	http_framing_header(cls, key, value);
	return MHD_YES;
}

int http_framing_check(struct MHD_Connection *conn, char *why, size_t whylen)
{
	struct http_framing f = {0};

	MHD_get_connection_values(conn, MHD_HEADER_KIND, count_framing, &f);
	return http_framing_verdict(&f, why, whylen);
}

int http_framing_verdict(const struct http_framing *f, char *why, size_t whylen)
{
	if (f->length_bad)
		snprintf(why, whylen, "Content-Length must be one decimal number");
	else if (f->lengths_differ)
		snprintf(why, whylen, "Content-Length is given more than once with different values");
	else if (f->length && f->encodings)
		snprintf(why, whylen, "both Content-Length and Transfer-Encoding are given");
	else if (f->encodings > 1 || (f->encodings && !f->plain_chunked))
		snprintf(why, whylen, "Transfer-Encoding must be exactly \"chunked\"");
	else
		return 0;
	return -1;
}
