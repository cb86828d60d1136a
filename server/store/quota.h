/* quota.h - the limits a plan, a group's plan, a per-user override or the
 * config's defaults set, their text form in the store, and the one pure
 * resolver that turns them into a user's effective limits with the source of
 * each. No I/O here: plans.c, groups.c and user_quotas.c read the rows. */
#ifndef LABD_QUOTA_H
#define LABD_QUOTA_H

#include <stddef.h>
#include <stdint.h>

#include "labd/parse.h"

/* Every limit, its unit in its name (docs/api.md lists them). */
enum quota_limit {
	QL_CPU_RUNTIME_MAX_S,
	QL_GPU_RUNTIME_MAX_S,
	QL_CPU_S_PER_24H,
	QL_CPU_S_PER_7D,
	QL_GPU_S_PER_24H,
	QL_GPU_S_PER_7D,
	QL_STORAGE_BYTES,
	QL_MEMORY_BYTES,
	QL_CPUS_MILLI,
	QL_GPUS_PER_RUNTIME,
	QL_CONCURRENT_JOBS,
	QL_JOB_MAX_RUNTIME_S,
	QL_NETWORK,            /* QUOTA_NETWORK_NONE or _EGRESS; the API says "none"/"egress" */
	QL_EGRESS_BYTES_PER_S, /* each way */
	QL_JOB_STORAGE_BYTES,  /* what a user's kept jobs hold (store/job_storage.h) */
	QL_COUNT
};

#define QUOTA_UNSET INT64_MIN /* not set here: the next source decides */
#define QUOTA_UNLIMITED (-1)  /* set, and no limit */
#define QUOTA_NETWORK_NONE 0   /* loopback only */
#define QUOTA_NETWORK_EGRESS 1 /* outbound through pasta (docs/sandbox.md) */
#define QUOTA_NAME_MAX PARSE_USER_NAME_MAX /* plan and group names: parse_user_name_ok() */

struct quota_limits {
	int64_t v[QL_COUNT]; /* a value >= 0, QUOTA_UNLIMITED or QUOTA_UNSET */
};

/* All QUOTA_UNSET. */
void quota_limits_clear(struct quota_limits *l);
const char *quota_limit_name(enum quota_limit which);
/* The limit named name, or -1. */
int quota_limit_parse(const char *name);
/* Whether value is allowed for the limit (QUOTA_UNLIMITED always is, but for
 * QL_NETWORK, which is none or egress). */
int quota_value_ok(enum quota_limit which, int64_t value);
/* The store's text form: "name=value ..." for each set limit; -ENOSPC when it
 * does not fit. */
int quota_limits_format(const struct quota_limits *l, char *out, size_t len);
/* Parses quota_limits_format's text; -EINVAL on an unknown name or bad value. */
int quota_limits_parse(const char *text, struct quota_limits *out);

enum quota_source { QUOTA_FROM_DEFAULT, QUOTA_FROM_GROUP, QUOTA_FROM_PLAN, QUOTA_FROM_OVERRIDE };
const char *quota_source_name(enum quota_source source);

struct quota_group_plan {
	char group[QUOTA_NAME_MAX + 1];
	char plan[QUOTA_NAME_MAX + 1];
	struct quota_limits limits;
};

/* What a user's limits are made of. */
struct quota_inputs {
	struct quota_limits defaults; /* every limit set (from the config) */
	const struct quota_group_plan *groups; /* the user's groups with a plan, any order */
	size_t n_groups;
	const char *plan; /* the user's own plan, NULL = none */
	struct quota_limits plan_limits;
	struct quota_limits overrides;
};

struct quota_effective {
	int64_t v[QL_COUNT];
	struct {
		enum quota_source source;
		char group[QUOTA_NAME_MAX + 1]; /* QUOTA_FROM_GROUP: the group */
		char plan[QUOTA_NAME_MAX + 1];  /* QUOTA_FROM_GROUP/PLAN: the plan */
	} from[QL_COUNT];
};

/* Results of the plan, group and user-quota store calls. */
enum quota_change_result {
	QUOTA_OK = 0,
	QUOTA_ERROR = -1,
	QUOTA_CONFLICT = -2,  /* the name exists (DB_CONFLICT) */
	QUOTA_NOT_FOUND = -3, /* no plan/group of that name */
	QUOTA_NO_PLAN = -4,   /* a named plan does not exist */
	QUOTA_NO_USER = -5,   /* a named member does not exist */
	QUOTA_IN_USE = -6,    /* the plan is some group's or user's */
};

/* Precedence, per limit: the user's override, else the user's own plan, else
 * the plans of the user's groups, else the default. Among several groups the
 * most generous value wins (unlimited above any number); a tie goes to the
 * group whose name sorts first, so the answer never depends on row order. */
void quota_resolve(const struct quota_inputs *in, struct quota_effective *out);

#endif
