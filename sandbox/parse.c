/* parse.c - parsers for the sandbox-only options (GPU lists, network mode) and /proc; see
 * parse.h. Sizes, CPU counts, numbers and user names use labd/parse.h. */
#include "sandbox/parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
