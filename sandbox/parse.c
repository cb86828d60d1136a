/* parse.c - pure parsers for sandbox limits; see parse.h. */
#include "sandbox/parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sandbox_parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !isdigit((unsigned char)s[0]))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < 1 || v > max)
		return -1;
	*out = v;
	return 0;
}

int sandbox_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!s || !isdigit((unsigned char)s[0]))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: return -1;
	}
	if (shift && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0))
		end += strlen(end);
	if (*end)
		return -1;
	if (shift && v > (UINT64_MAX >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

int sandbox_parse_cpus(const char *s, uint32_t *milli)
{
	uint64_t whole = 0, frac = 0;
	unsigned digits = 0;
	const char *p = s;

	if (!s || !isdigit((unsigned char)*p))
		return -1;
	while (isdigit((unsigned char)*p)) {
		whole = whole * 10 + (uint64_t)(*p++ - '0');
		if (whole > 1024)
			return -1;
	}
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return -1;
		while (isdigit((unsigned char)*p)) {
			if (++digits > 3)
				return -1;
			frac = frac * 10 + (uint64_t)(*p++ - '0');
		}
		while (digits++ < 3)
			frac *= 10;
	}
	if (*p)
		return -1;
	whole = whole * 1000 + frac;
	if (whole < 1 || whole > 1024 * 1000)
		return -1;
	*milli = (uint32_t)whole;
	return 0;
}

int sandbox_parse_gpus(const char *s, struct sandbox_spec *spec)
{
	const char *p = s;

	if (!s || !*s)
		return -1;
	spec->n_gpus = 0;
	for (;;) {
		unsigned v = 0, nd = 0;
		while (isdigit((unsigned char)*p)) {
			v = v * 10 + (unsigned)(*p++ - '0');
			if (++nd > 3 || v > 255)
				return -1;
		}
		if (nd == 0 || spec->n_gpus >= SANDBOX_MAX_GPUS)
			return -1;
		for (unsigned i = 0; i < spec->n_gpus; i++)
			if (spec->gpus[i] == v)
				return -1;
		spec->gpus[spec->n_gpus++] = v;
		if (*p == '\0')
			return 0;
		if (*p++ != ',')
			return -1;
	}
}

int sandbox_parse_net(const char *s, enum sandbox_net *out)
{
	if (s && strcmp(s, "none") == 0)
		*out = SANDBOX_NET_NONE;
	else if (s && strcmp(s, "egress") == 0)
		*out = SANDBOX_NET_EGRESS;
	else
		return -1;
	return 0;
}

int sandbox_user_name_ok(const char *s)
{
	size_t n;

	if (!s)
		return 0;
	n = strlen(s);
	if (n < 1 || n > 32)
		return 0;
	if (!(islower((unsigned char)s[0]) || s[0] == '_'))
		return 0;
	for (size_t i = 1; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!(islower(c) || isdigit(c) || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

int sandbox_parse_stat_field(const char *stat, unsigned field, uint64_t *out)
{
	/* comm (field 2) may hold spaces and ')': fields restart after the last ')' */
	const char *p = strrchr(stat, ')');
	char *end;
	unsigned long long v;

	if (!p || field < 3)
		return -1;
	p++;
	for (unsigned f = 3; f <= field; f++) {
		if (*p != ' ')
			return -1;
		p++;
		if (f < field)
			p += strcspn(p, " \n");
	}
	if (!isdigit((unsigned char)*p))
		return -1;
	errno = 0;
	v = strtoull(p, &end, 10);
	if (errno || (*end && *end != ' ' && *end != '\n'))
		return -1;
	*out = v;
	return 0;
}
