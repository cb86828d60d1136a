/* fuzz_headers.c - the request and response headers labd reads itself:
 * the Cookie header the proxy forwards with labd's own cookies cut out
 * (proxy/proxy.c), the Host header that picks the origin (auth/origin.c),
 * and the upstream response headers the proxy drops (hop-by-hop, labd's
 * cookies, scope wideners: proxy/proxy.c, proxy/scrub.c); and beside them
 * the form body a CSRF token may come in (http/http.c) and the login's
 * next= target (auth/auth.c, the open-redirect guard). Input: a header name
 * on the first line, its value after. */
#include "auth/auth.h"
#include "auth/handoff.h"
#include "auth/origin.h"
#include "fuzz.h"
#include "http/http.h"
#include "labd/parse.h"
#include "proxy/proxy.h"
#include "proxy/scrub.h"
#include "store/sessions.h"

/* Whether a Cookie header value still carries a cookie called name, read
 * the lenient way a Python server reads it (a part split at ';', the name
 * and value stripped of blanks). */
static bool carries(const char *value, const char *name)
{
	for (const char *p = value; *p;) {
		size_t len = strcspn(p, ";");
		const char *eq = memchr(p, '=', len), *k = p, *e = eq;
		if (eq) {
			while (k < e && strchr(" \t", *k))
				k++;
			while (e > k && strchr(" \t", e[-1]))
				e--;
			if ((size_t)(e - k) == strlen(name) && !strncmp(k, name, (size_t)(e - k)))
				return true;
		}
		p += len + (p[len] == ';');
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *name = fuzz_take_line(&data, &size), *value = fuzz_cstr(data, size);
	char out[4096], user[USER_NAME_MAX + 1];

	proxy_strip_cookie(value, SESSION_COOKIE_NAME, out, sizeof(out));
	FUZZ_ASSERT(memchr(out, '\0', sizeof(out)) && !carries(out, SESSION_COOKIE_NAME));
	proxy_strip_cookie(value, RUNTIME_COOKIE_NAME, out, sizeof(out));
	FUZZ_ASSERT(!carries(out, RUNTIME_COOKIE_NAME));
	if (origin_classify(value, "lab.example.org", user) == ORIGIN_USER)
		FUZZ_ASSERT(parse_user_name_ok(user));
	/* a user's label leads back to the user and to no one else */
	char label[ORIGIN_LABEL_MAX + 1];
	if (origin_label_user(value, user) == 0)
		FUZZ_ASSERT(origin_label(user, label) == 0 && strcmp(label, value) == 0);
	if (origin_label(value, label) == 0)
		FUZZ_ASSERT(strlen(label) <= 45 && origin_label_user(label, user) == 0 &&
			    strcmp(user, value) == 0 && label[strspn(label, "abcdefghijklmnopqrstuvwxyz0123456789-")] == '\0');
	(void)origin_classify(value, "", user);
	if (http_form_field(value, "csrf_token", out, 66) == 0)
		FUZZ_ASSERT(strlen(out) < 66);
	if (auth_next_is_local(value)) /* a path on labd's origin, never another host */
		FUZZ_ASSERT(value[0] == '/' && value[1] != '/' && !strchr(value, '\\') &&
			    !strpbrk(value, " \t\r\n"));
	(void)proxy_is_hop_header(name);
	(void)scrub_header_dropped(name, value);
	free(name);
	free(value);
	return 0;
}
