/* origin.c - user origins from the Host header; see origin.h. */
#include "auth/origin.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "labd/app.h"
#include "config/config.h"
#include "http/http.h"
#include "labd/parse.h"

/* Host names longer than this are no origin of ours. */
#define HOST_MAX 255

/* Splits "name[:port]" into a lowercase name and the ":port" suffix (or "");
 * -1 for IPv6 literals (labd's UI), an empty or oversized name, a bad port. */
static int split_host(const char *host, char name[HOST_MAX + 1], const char **port)
{
	const char *colon = strchr(host, ':');
	size_t len = colon ? (size_t)(colon - host) : strlen(host);

	if (host[0] == '[' || len == 0 || len > HOST_MAX)
		return -1;
	if (colon && (colon[1] == '\0' || strspn(colon + 1, "0123456789") != strlen(colon + 1)))
		return -1;
	for (size_t i = 0; i < len; i++)
		name[i] = (char)tolower((unsigned char)host[i]);
	name[len] = '\0';
	if (len > 1 && name[len - 1] == '.') /* "alice.localhost." is the same name */
		name[len - 1] = '\0';
	*port = colon ? colon : "";
	return 0;
}

/* A name's symbols ('-', '_', '.') as base-3 digits, three to a code
 * character (27 values). */
static const char SYMBOLS[] = "-_.";
static const char CODE[] = "abcdefghijklmnopqrstuvwxyz0";

static bool is_symbol(char c)
{
	return c == '-' || c == '_' || c == '.';
}

/* A name that is a DNS label as it stands: [a-z0-9-], no "--", no '-' last
 * (every name made under the old rule that a browser would take). */
static bool name_is_plain(const char *name)
{
	size_t n = strlen(name);

	return strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") == n && !strstr(name, "--") &&
	       name[n - 1] != '-';
}

int origin_label(const char *name, char out[ORIGIN_LABEL_MAX + 1])
{
	size_t n, len, k = 0;
	unsigned v = 0, place = 1;

	if (!parse_user_name_ok(name))
		return -1;
	n = strlen(name);
	if (name_is_plain(name)) {
		memcpy(out, name, n + 1);
		return 0;
	}
	for (len = 0; len < n; len++)
		out[len] = is_symbol(name[len]) ? '-' : name[len];
	out[len++] = '-';
	out[len++] = '-';
	for (size_t i = 0; i < n; i++) {
		if (!is_symbol(name[i]))
			continue;
		v += (unsigned)(strchr(SYMBOLS, name[i]) - SYMBOLS) * place;
		place *= 3;
		if (++k % 3 == 0) {
			out[len++] = CODE[v];
			v = 0;
			place = 1;
		}
	}
	if (k % 3)
		out[len++] = CODE[v];
	out[len] = '\0';
	/* "xn--" opens an internationalized label, which browsers decode */
	return strncmp(out, "xn--", 4) == 0 ? -1 : 0;
}

int origin_label_user(const char *label, char user[USER_NAME_MAX + 1])
{
	const char *sep = NULL, *code;
	char name[USER_NAME_MAX + 1], again[ORIGIN_LABEL_MAX + 1];
	size_t n, k = 0, codelen;

	for (const char *p = strstr(label, "--"); p; p = strstr(p + 1, "--"))
		sep = p;
	n = sep ? (size_t)(sep - label) : strlen(label);
	if (n == 0 || n > USER_NAME_MAX)
		return -1;
	memcpy(name, label, n);
	name[n] = '\0';
	code = sep ? sep + 2 : "";
	codelen = strlen(code);
	for (size_t i = 0; i < n; i++) {
		const char *c;
		unsigned v;

		if (name[i] != '-' || !sep)
			continue;
		c = k / 3 < codelen ? strchr(CODE, code[k / 3]) : NULL;
		if (!c)
			return -1;
		v = (unsigned)(c - CODE);
		for (size_t t = k % 3; t > 0; t--)
			v /= 3;
		name[i] = SYMBOLS[v % 3];
		k++;
	}
	/* only the one label origin_label makes for the name is its origin */
	if (origin_label(name, again) < 0 || strcmp(again, label) != 0)
		return -1;
	memcpy(user, name, n + 1);
	return 0;
}

enum origin_kind origin_classify(const char *host, const char *user_domain,
				 char user[USER_NAME_MAX + 1])
{
	char name[HOST_MAX + 1];
	const char *port;
	size_t nlen, dlen = strlen(user_domain);

	if (!host || split_host(host, name, &port) < 0)
		return ORIGIN_UI;
	nlen = strlen(name);
	if (nlen <= dlen + 1 || name[nlen - dlen - 1] != '.' ||
	    strcmp(name + nlen - dlen, user_domain) != 0)
		return ORIGIN_UI;
	name[nlen - dlen - 1] = '\0'; /* the label(s) before ".<user_domain>" */
	if (strlen(name) > ORIGIN_LABEL_MAX || origin_label_user(name, user) < 0)
		return ORIGIN_UNKNOWN;
	return ORIGIN_USER;
}

enum origin_kind origin_of_request(struct http_request *req, char user[USER_NAME_MAX + 1])
{
	const struct labd_config *cfg = http_app(req)->cfg;

	if (!cfg->origin_per_user)
		return ORIGIN_UI;
	return origin_classify(http_header(req, "Host"), cfg->user_domain, user);
}

bool origin_header_is_user(struct http_request *req)
{
	const struct labd_config *cfg = http_app(req)->cfg;
	const char *origin = http_header(req, "Origin");
	const char *sep = origin ? strstr(origin, "://") : NULL;
	char user[USER_NAME_MAX + 1];

	if (!cfg->origin_per_user || !sep)
		return false;
	return origin_classify(sep + 3, cfg->user_domain, user) != ORIGIN_UI;
}

/* The ":port" of the request's Host header, or "". */
static const char *request_port(struct http_request *req)
{
	const char *host = http_header(req, "Host");
	const char *colon = host && host[0] != '[' ? strchr(host, ':') : NULL;

	if (!colon || strspn(colon + 1, "0123456789") != strlen(colon + 1) || strlen(colon) > 6)
		return "";
	return colon;
}

static const char *scheme(struct http_request *req)
{
	return http_app(req)->cfg->secure_cookies ? "https" : "http";
}

int origin_user_url(struct http_request *req, const char *user, char *out, size_t outlen)
{
	char label[ORIGIN_LABEL_MAX + 1];
	int n = origin_label(user, label) < 0
			? -1
			: snprintf(out, outlen, "%s://%s.%s%s", scheme(req), label,
				   http_app(req)->cfg->user_domain, request_port(req));
	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

int origin_ui_url(struct http_request *req, char *out, size_t outlen)
{
	const struct labd_config *cfg = http_app(req)->cfg;
	int n = cfg->ui_origin[0]
			? snprintf(out, outlen, "%s", cfg->ui_origin)
			: snprintf(out, outlen, "%s://%s%s", scheme(req), cfg->user_domain,
				   request_port(req));
	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}
