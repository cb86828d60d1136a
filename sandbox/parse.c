/* parse.c - parsers for the sandbox-only options (GPU lists, network mode) and /proc; see
 * parse.h. Sizes, CPU counts, numbers and user names use labd/parse.h. */
#include "sandbox/parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "labd/gpucaps.h"
#include "labd/gpudev.h"

int sandbox_parse_gpus(const char *s, struct sandbox_spec *spec)
{
	char buf[SANDBOX_MAX_GPUS * GPUDEV_TEXT_MAX + 1], *save = NULL;
	unsigned id;

	if (!s || !*s || strlen(s) >= sizeof(buf) || s[strlen(s) - 1] == ',')
		return -1;
	memcpy(buf, s, strlen(s) + 1);
	spec->n_gpus = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (gpudev_parse(t, &id) < 0 || spec->n_gpus >= SANDBOX_MAX_GPUS)
			return -1;
		for (unsigned i = 0; i < spec->n_gpus; i++)
			if (gpudev_conflict(spec->gpus[i], id))
				return -1;
		spec->gpus[spec->n_gpus++] = id;
	}
	return spec->n_gpus && !strstr(s, ",,") && s[0] != ',' ? 0 : -1;
}

int sandbox_parse_gpu_uuids(char *s, struct sandbox_spec *spec)
{
	char *save = NULL;
	unsigned n = 0;

	if (!s || !*s)
		return -1;
	for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (n >= SANDBOX_MAX_GPUS || !gpucaps_uuid_ok(t))
			return -1;
		spec->gpu_uuids[n++] = t;
	}
	return n ? 0 : -1;
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
