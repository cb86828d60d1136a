/* quota.c - limit names, their text form and the resolver; see quota.h. */
#include "store/quota.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	int64_t min, max; /* allowed values besides QUOTA_UNLIMITED */
} limits[QL_COUNT] = {
	[QL_CPU_RUNTIME_MAX_S] = {"cpu_runtime_max_s", 60, 365 * 86400LL},
	[QL_GPU_RUNTIME_MAX_S] = {"gpu_runtime_max_s", 60, 365 * 86400LL},
	[QL_CPU_S_PER_24H] = {"cpu_s_per_24h", 0, 64 * 86400LL},
	[QL_CPU_S_PER_7D] = {"cpu_s_per_7d", 0, 64 * 7 * 86400LL},
	[QL_GPU_S_PER_24H] = {"gpu_s_per_24h", 0, 64 * 86400LL},
	[QL_GPU_S_PER_7D] = {"gpu_s_per_7d", 0, 64 * 7 * 86400LL},
	[QL_STORAGE_BYTES] = {"storage_bytes", 64LL << 20, 16LL << 40},
	[QL_MEMORY_BYTES] = {"memory_bytes", 64LL << 20, 16LL << 40},
	[QL_CPUS_MILLI] = {"cpus_milli", 10, PARSE_CPUS_MAX_MILLI},
	[QL_GPUS_PER_RUNTIME] = {"gpus_per_runtime", 0, 64},
	[QL_CONCURRENT_JOBS] = {"concurrent_jobs", 0, 10000},
	[QL_JOB_MAX_RUNTIME_S] = {"job_max_runtime_s", 60, 365 * 86400LL},
	[QL_NETWORK] = {"network", QUOTA_NETWORK_NONE, QUOTA_NETWORK_EGRESS},
	[QL_EGRESS_BYTES_PER_S] = {"egress_bytes_per_s", 1024, 1LL << 40},
	[QL_JOB_STORAGE_BYTES] = {"job_storage_bytes", 1LL << 20, 1LL << 44},
};

void quota_limits_clear(struct quota_limits *l)
{
	for (int i = 0; i < QL_COUNT; i++)
		l->v[i] = QUOTA_UNSET;
}

const char *quota_limit_name(enum quota_limit which)
{
	return (unsigned)which < QL_COUNT ? limits[which].name : "?";
}

int quota_limit_parse(const char *name)
{
	for (int i = 0; i < QL_COUNT; i++)
		if (!strcmp(limits[i].name, name))
			return i;
	return -1;
}

int quota_value_ok(enum quota_limit which, int64_t value)
{
	if (value == QUOTA_UNLIMITED)
		return which != QL_NETWORK;
	return value >= limits[which].min && value <= limits[which].max;
}

int quota_limits_format(const struct quota_limits *l, char *out, size_t len)
{
	size_t used = 0;

	out[0] = '\0';
	for (int i = 0; i < QL_COUNT; i++) {
		if (l->v[i] == QUOTA_UNSET)
			continue;
		int n = snprintf(out + used, len - used, "%s%s=%lld", used ? " " : "",
				 limits[i].name, (long long)l->v[i]);
		if (n < 0 || (size_t)n >= len - used)
			return -ENOSPC;
		used += (size_t)n;
	}
	return 0;
}

int quota_limits_parse(const char *text, struct quota_limits *out)
{
	char buf[1024], *save = NULL;

	quota_limits_clear(out);
	if (snprintf(buf, sizeof(buf), "%s", text) >= (int)sizeof(buf))
		return -EINVAL;
	for (char *item = strtok_r(buf, " ", &save); item; item = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(item, '='), *end;
		if (!eq)
			return -EINVAL;
		*eq = '\0';
		int which = quota_limit_parse(item);
		long long v = strtoll(eq + 1, &end, 10);
		if (which < 0 || *end || end == eq + 1 || !quota_value_ok(which, v))
			return -EINVAL;
		out->v[which] = v;
	}
	return 0;
}

const char *quota_source_name(enum quota_source source)
{
	static const char *const names[] = {"default", "group", "plan", "override"};
	return names[source];
}

/* a is more generous than b: unlimited above any number. */
static int more_generous(int64_t a, int64_t b)
{
	if (b == QUOTA_UNLIMITED)
		return 0;
	return a == QUOTA_UNLIMITED || a > b;
}

/* The most generous group value of limit i, ties to the first group name. */
static const struct quota_group_plan *best_group(const struct quota_inputs *in, int i)
{
	const struct quota_group_plan *best = NULL;

	for (size_t g = 0; g < in->n_groups; g++) {
		const struct quota_group_plan *c = &in->groups[g];
		int64_t v = c->limits.v[i];
		if (v == QUOTA_UNSET)
			continue;
		if (!best || more_generous(v, best->limits.v[i]) ||
		    (v == best->limits.v[i] && strcmp(c->group, best->group) < 0))
			best = c;
	}
	return best;
}

static void set_from(struct quota_effective *out, int i, int64_t v, enum quota_source src,
		     const char *group, const char *plan)
{
	out->v[i] = v;
	out->from[i].source = src;
	snprintf(out->from[i].group, sizeof(out->from[i].group), "%s", group ? group : "");
	snprintf(out->from[i].plan, sizeof(out->from[i].plan), "%s", plan ? plan : "");
}

void quota_resolve(const struct quota_inputs *in, struct quota_effective *out)
{
	for (int i = 0; i < QL_COUNT; i++) {
		const struct quota_group_plan *g = best_group(in, i);

		if (in->overrides.v[i] != QUOTA_UNSET)
			set_from(out, i, in->overrides.v[i], QUOTA_FROM_OVERRIDE, NULL, NULL);
		else if (in->plan && in->plan_limits.v[i] != QUOTA_UNSET)
			set_from(out, i, in->plan_limits.v[i], QUOTA_FROM_PLAN, NULL, in->plan);
		else if (g)
			set_from(out, i, g->limits.v[i], QUOTA_FROM_GROUP, g->group, g->plan);
		else
			set_from(out, i, in->defaults.v[i], QUOTA_FROM_DEFAULT, NULL, NULL);
	}
}
