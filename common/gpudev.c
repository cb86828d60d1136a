/* gpudev.c - the GPU device id: encode, decode, text (include/labd/gpudev.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labd/gpudev.h"

#define KIND_SHIFT 16
#define KIND_MIG 1u
#define KIND_SHARE 2u

bool gpudev_encode(const struct gpudev *d, unsigned *id)
{
	*id = 0;
	if (d->minor > GPUDEV_MINOR_MAX)
		return false;
	switch (d->kind) {
	case GPUDEV_WHOLE:
		*id = d->minor;
		return true;
	case GPUDEV_MIG:
		if (d->gi > GPUDEV_GI_MAX || d->ci > GPUDEV_CI_MAX)
			return false;
		*id = KIND_MIG << KIND_SHIFT | d->minor << 8 | d->gi << 3 | d->ci;
		return true;
	case GPUDEV_SHARE:
		if (d->share > GPUDEV_SHARE_MAX)
			return false;
		*id = KIND_SHARE << KIND_SHIFT | d->minor << 8 | d->share;
		return true;
	}
	return false;
}

bool gpudev_decode(unsigned id, struct gpudev *out)
{
	unsigned kind = id >> KIND_SHIFT, low = id & 0xffu;

	memset(out, 0, sizeof(*out));
	out->minor = (id >> 8) & 0xffu;
	switch (kind) {
	case 0:
		if (id > GPUDEV_MINOR_MAX)
			return false;
		out->kind = GPUDEV_WHOLE;
		out->minor = id;
		return true;
	case KIND_MIG:
		out->kind = GPUDEV_MIG;
		out->gi = low >> 3;
		out->ci = low & 7u;
		return true;
	case KIND_SHARE:
		out->kind = GPUDEV_SHARE;
		out->share = low;
		return true;
	default:
		return false;
	}
}

void gpudev_format(unsigned id, char *out, size_t len)
{
	struct gpudev d;

	if (!gpudev_decode(id, &d))
		snprintf(out, len, "?");
	else if (d.kind == GPUDEV_MIG)
		snprintf(out, len, "%u/gi%u/ci%u", d.minor, d.gi, d.ci);
	else if (d.kind == GPUDEV_SHARE)
		snprintf(out, len, "%u/share%u", d.minor, d.share);
	else
		snprintf(out, len, "%u", d.minor);
}

/* A decimal number of at most 3 digits at *p, advanced past it: 0, or -EINVAL. */
static int small_number(const char **p, unsigned max, unsigned *out)
{
	char *end;
	unsigned long v;

	if (**p < '0' || **p > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(*p, &end, 10);
	if (errno || end - *p > 3 || v > max)
		return -EINVAL;
	*p = end;
	*out = (unsigned)v;
	return 0;
}

int gpudev_parse(const char *text, unsigned *id)
{
	struct gpudev d = {.kind = GPUDEV_WHOLE};
	const char *p = text;

	if (!text || small_number(&p, GPUDEV_MINOR_MAX, &d.minor) < 0)
		return -EINVAL;
	if (strncmp(p, "/gi", 3) == 0) {
		p += 3;
		d.kind = GPUDEV_MIG;
		if (small_number(&p, GPUDEV_GI_MAX, &d.gi) < 0 || strncmp(p, "/ci", 3) != 0)
			return -EINVAL;
		p += 3;
		if (small_number(&p, GPUDEV_CI_MAX, &d.ci) < 0)
			return -EINVAL;
	} else if (strncmp(p, "/share", 6) == 0) {
		p += 6;
		d.kind = GPUDEV_SHARE;
		if (small_number(&p, GPUDEV_SHARE_MAX, &d.share) < 0)
			return -EINVAL;
	}
	if (*p != '\0')
		return -EINVAL;
	return gpudev_encode(&d, id) ? 0 : -EINVAL;
}

unsigned gpudev_minor(unsigned id)
{
	struct gpudev d;

	return gpudev_decode(id, &d) ? d.minor : id;
}

bool gpudev_conflict(unsigned a, unsigned b)
{
	struct gpudev da, db;

	if (a == b)
		return true;
	if (!gpudev_decode(a, &da) || !gpudev_decode(b, &db) || da.minor != db.minor)
		return false;
	return da.kind == GPUDEV_WHOLE || db.kind == GPUDEV_WHOLE;
}
