/* parse.c - parsers for the sandbox-only options (GPU lists, network mode); see
 * parse.h. Sizes, CPU counts, numbers and user names use labd/parse.h. */
#include "sandbox/parse.h"

#include <ctype.h>
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
