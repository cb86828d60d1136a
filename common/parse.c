/* parse.c - value parsers shared by server and sandbox; see include/labd/parse.h. */
#include "labd/parse.h"

#include <errno.h>
#include <string.h>

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_lower(char c)
{
	return c >= 'a' && c <= 'z';
}

bool parse_user_name_ok(const char *s)
{
	size_t n;

	if (!s || !(is_lower(s[0]) || is_digit(s[0])))
		return false;
	for (n = 1; s[n]; n++) {
		if (n >= PARSE_USER_NAME_MAX)
			return false;
		if (!(is_lower(s[n]) || is_digit(s[n]) || s[n] == '_' || s[n] == '-' || s[n] == '.'))
			return false;
	}
	return true;
}

bool parse_token_ok(const char *s)
{
	size_t n;

	if (!s)
		return false;
	for (n = 0; s[n]; n++) {
		char c = s[n];
		if (n >= PARSE_TOKEN_LEN ||
		    !((c >= 'A' && c <= 'Z') || is_lower(c) || is_digit(c) || c == '-' || c == '_'))
			return false;
	}
	return n == PARSE_TOKEN_LEN;
}

/* Leading decimal digits into *v, *end past them; -EINVAL when there are none,
 * -ERANGE past UINT64_MAX. strtoull is not used: it takes signs and spaces. */
static int digits(const char *s, uint64_t *v, const char **end)
{
	uint64_t x = 0;
	const char *p = s;

	if (!s || !is_digit(*p))
		return -EINVAL;
	for (; is_digit(*p); p++) {
		unsigned d = (unsigned)(*p - '0');
		if (x > (UINT64_MAX - d) / 10)
			return -ERANGE;
		x = x * 10 + d;
	}
	*v = x;
	*end = p;
	return 0;
}

int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	const char *end;
	uint64_t v;
	int rc = digits(s, &v, &end);

	if (rc < 0)
		return rc;
	if (*end)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int parse_size_bytes(const char *s, uint64_t *out)
{
	static const char units[] = "KMGT";
	const char *end, *u;
	unsigned shift = 0;
	uint64_t v;
	int rc = digits(s, &v, &end);

	if (rc < 0)
		return rc;
	if (*end) {
		char c = *end >= 'a' && *end <= 'z' ? (char)(*end - 'a' + 'A') : *end;
		if (!(u = strchr(units, c)))
			return -EINVAL;
		shift = 10 * (unsigned)(u - units + 1);
		end++;
		if (strcmp(end, "B") == 0 || strcmp(end, "iB") == 0)
			end += strlen(end);
		if (*end)
			return -EINVAL;
	}
	if (v > UINT64_MAX >> shift)
		return -ERANGE;
	*out = v << shift;
	return 0;
}

int parse_duration_s(const char *s, int64_t *out)
{
	static const char units[] = "smhd";
	static const uint64_t scale[] = {1, 60, 3600, 86400};
	const char *end, *u;
	uint64_t v;
	int rc = digits(s, &v, &end);

	if (rc < 0)
		return rc;
	if (*end) {
		if (!(u = strchr(units, *end)) || end[1] != '\0')
			return -EINVAL;
		if (v > UINT64_MAX / scale[u - units])
			return -ERANGE;
		v *= scale[u - units];
	}
	if (v > (uint64_t)INT32_MAX * 86400)
		return -ERANGE;
	*out = (int64_t)v;
	return 0;
}

int parse_cpus_milli(const char *s, uint32_t *out)
{
	const char *p;
	uint64_t whole, frac = 0;
	unsigned decimals = 0;
	int rc = digits(s, &whole, &p);

	if (rc < 0)
		return rc;
	if (*p == '.') {
		if (!is_digit(*++p))
			return -EINVAL;
		for (; is_digit(*p); p++) {
			if (++decimals > 3)
				return -EINVAL; /* finer than a milli-CPU */
			frac = frac * 10 + (uint64_t)(*p - '0');
		}
		for (; decimals < 3; decimals++)
			frac *= 10;
	}
	if (*p)
		return -EINVAL;
	if (whole > PARSE_CPUS_MAX_MILLI / 1000)
		return -ERANGE;
	whole = whole * 1000 + frac;
	if (whole < 1 || whole > PARSE_CPUS_MAX_MILLI)
		return -ERANGE;
	*out = (uint32_t)whole;
	return 0;
}
