/* scrub.c - see scrub.h. */
#include "proxy/scrub.h"

#include <string.h>
#include <strings.h>

#include "auth/handoff.h"
#include "store/sessions.h"

int scrub_init(struct scrub *s, const char *needle)
{
	size_t len = strlen(needle);

	if (len < 1 || len > SCRUB_NEEDLE_MAX)
		return -1;
	memcpy(s->needle, needle, len + 1);
	s->nlen = len;
	s->ncarry = 0;
	return 0;
}

/* Removes needle occurrences from buf[0..len) in place; returns the new length. */
static size_t remove_all(const char *needle, size_t nlen, char *buf, size_t len)
{
	size_t r = 0, w = 0;

	while (r < len) {
		char *hit = memmem(buf + r, len - r, needle, nlen);
		size_t upto = hit ? (size_t)(hit - buf) : len;
		memmove(buf + w, buf + r, upto - r);
		w += upto - r;
		r = hit ? upto + nlen : len;
	}
	return w;
}

size_t scrub_feed(struct scrub *s, const char *in, size_t n, char *out, bool final)
{
	size_t len, keep;

	memcpy(out, s->carry, s->ncarry);
	memcpy(out + s->ncarry, in, n);
	len = remove_all(s->needle, s->nlen, out, s->ncarry + n);
	/* Hold back a tail that could be the start of a match finished by the
	 * next piece; nothing held back can be a whole match already. */
	keep = final ? 0 : (len < s->nlen - 1 ? len : s->nlen - 1);
	memcpy(s->carry, out + len - keep, keep);
	s->ncarry = keep;
	return len - keep;
}

void scrub_string(const char *needle, char *text)
{
	size_t len = remove_all(needle, strlen(needle), text, strlen(text));
	text[len] = '\0';
}

/* True when the Set-Cookie value sets the cookie called name (cookie names
 * compared without case: what one browser folds another may not). */
static bool sets_cookie(const char *value, const char *name)
{
	size_t len;

	value += strspn(value, " \t");
	len = strcspn(value, "=;");
	while (len > 0 && (value[len - 1] == ' ' || value[len - 1] == '\t'))
		len--;
	return len == strlen(name) && strncasecmp(value, name, len) == 0;
}

bool scrub_header_dropped(const char *name, const char *value)
{
	if (!strcasecmp(name, "Service-Worker-Allowed") || !strcasecmp(name, "Clear-Site-Data"))
		return true;
	return !strcasecmp(name, "Set-Cookie") &&
	       (sets_cookie(value, SESSION_COOKIE_NAME) || sets_cookie(value, RUNTIME_COOKIE_NAME) ||
		sets_cookie(value, "__Host-" SESSION_COOKIE_NAME) ||
		sets_cookie(value, "__Host-" RUNTIME_COOKIE_NAME));
}
