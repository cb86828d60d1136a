/* framing.h - refuses request framing that two HTTP parsers could read
 * differently (request smuggling, RFC 9112 section 6.3): a body length given
 * both by Content-Length and Transfer-Encoding, several Content-Length values
 * that differ, a Content-Length that is not one decimal number (a sign, a
 * list), a Transfer-Encoding other than plain "chunked". A folded header line
 * (obs-fold) cannot be seen here: libmicrohttpd has already joined it on to
 * the header before (0.9.75 made "Content-Length: 5" + " 6" a header named
 * "Content-Length6"); what matters is that the proxy never forwards the
 * client's bytes but a head rebuilt from what libmicrohttpd parsed, with the
 * body framed by labd, so Jupyter cannot read the request otherwise. libmicrohttpd
 * picks one reading; Jupyter's parser might pick another, so labd refuses
 * them all with 400 before a handler sees the request. */
#ifndef LABD_FRAMING_H
#define LABD_FRAMING_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

/* 0 when the request's framing is unambiguous; -1 with the reason in why. */
int http_framing_check(struct MHD_Connection *conn, char *why, size_t whylen);

/* The pure part, header by header (the fuzz harness drives it directly).
 * Zeroed before the first header; values must outlive the verdict. */
struct http_framing {
	const char *length;  /* the first Content-Length seen */
	bool lengths_differ; /* a later one is not the same */
	bool length_bad;     /* not 1*DIGIT (a list, a sign, a folded line) */
	unsigned encodings;  /* Transfer-Encoding headers */
	bool plain_chunked;  /* the only one is exactly "chunked" */
};
void http_framing_header(struct http_framing *f, const char *key, const char *value);
/* What http_framing_check answers for the headers seen. */
int http_framing_verdict(const struct http_framing *f, char *why, size_t whylen);

#endif
