/* fuzz_resphead.c - the proxy's upstream response head: http_parser's pieces
 * collected by proxy/resphead.c, as the proxy reads Jupyter's answer (which
 * the user's code can write). Fed whole and in pieces, the head must come out
 * the same, and every pair walked must lie within what was written. */
#include <http_parser.h>
#include <strings.h>

#include "fuzz.h"
#include "proxy/proxy.h"
#include "proxy/resphead.h"
#include "proxy/scrub.h"

struct run {
	struct resphead head;
	bool done;
};

static int on_field(http_parser *hp, const char *at, size_t len)
{
	return resphead_field(&((struct run *)hp->data)->head, at, len);
}

static int on_value(http_parser *hp, const char *at, size_t len)
{
	return resphead_value(&((struct run *)hp->data)->head, at, len);
}

static int on_complete(http_parser *hp)
{
	struct run *r = hp->data;
	resphead_end(&r->head);
	r->done = true;
	return 1; /* as for a HEAD request: the head is all that is read here */
}

static const http_parser_settings settings = {
	.on_header_field = on_field,
	.on_header_value = on_value,
	.on_headers_complete = on_complete,
};

/* Parses data in pieces of at most step bytes (0: whole); whether a head came. */
static bool parse(const uint8_t *data, size_t size, size_t step, struct run *r, char *buf)
{
	http_parser hp;
	size_t off = 0;

	http_parser_init(&hp, HTTP_RESPONSE);
	hp.data = r;
	resphead_init(&r->head, buf);
	r->done = false;
	while (off < size && !r->done) {
		size_t n = step && step < size - off ? step : size - off;
		size_t took = http_parser_execute(&hp, &settings, (const char *)data + off, n);
		if (HTTP_PARSER_ERRNO(&hp) != HPE_OK && !r->done)
			return false;
		off += took;
		if (took < n && !r->done)
			return false;
	}
	return r->done;
}

static void walk(const struct resphead *h)
{
	const char *name, *value;
	size_t off = 0;

	while ((name = resphead_next(h, &off, &value))) {
		/* the value and its NUL lie within what was written */
		FUZZ_ASSERT(value + strlen(value) < h->buf + h->len && off <= h->len);
		(void)proxy_is_hop_header(name);
		(void)scrub_header_dropped(name, value);
	}
	(void)resphead_get(h, "Content-Type");
	(void)resphead_get(h, "Connection");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* exactly RESPHEAD_MAX each, so ASan sees a write past the end */
	char *a = malloc(RESPHEAD_MAX), *b = malloc(RESPHEAD_MAX);
	struct run whole, cut;
	size_t step = size ? (data[size - 1] & 0x0f) + 1 : 1;

	bool ok_whole = parse(data, size, 0, &whole, a);
	bool ok_cut = parse(data, size, step, &cut, b);
	FUZZ_ASSERT(ok_whole == ok_cut);
	if (ok_whole) {
		FUZZ_ASSERT(whole.head.len == cut.head.len &&
			    memcmp(whole.head.buf, cut.head.buf, whole.head.len) == 0);
		walk(&whole.head);
	}
	free(a);
	free(b);
	return 0;
}
