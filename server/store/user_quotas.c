/* user_quotas.c - the user_quotas table and a user's effective limits; see
 * user_quotas.h. */
#include "store/user_quotas.h"

#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "labd/log.h"
#include "store/db.h"
#include "store/groups.h"
#include "store/plans.h"

/* A user is in few groups; more than this are ignored (logged), oldest names last. */
#define USER_QUOTAS_MAX_GROUPS 64

void user_quotas_defaults(const struct labd_config *cfg, struct quota_limits *out)
{
	out->v[QL_CPU_RUNTIME_MAX_S] = cfg->cpu_limit_s;
	out->v[QL_GPU_RUNTIME_MAX_S] = cfg->gpu_limit_s;
	out->v[QL_CPU_S_PER_24H] = cfg->quota_cpu_s_per_24h;
	out->v[QL_CPU_S_PER_7D] = cfg->quota_cpu_s_per_7d;
	out->v[QL_GPU_S_PER_24H] = cfg->quota_gpu_s_per_24h;
	out->v[QL_GPU_S_PER_7D] = cfg->quota_gpu_s_per_7d;
	out->v[QL_STORAGE_BYTES] = (int64_t)cfg->home_size_bytes;
	out->v[QL_MEMORY_BYTES] = (int64_t)cfg->memory_bytes;
	out->v[QL_CPUS_MILLI] = cfg->cpus_milli;
	out->v[QL_GPUS_PER_RUNTIME] = cfg->quota_gpus_per_runtime;
	out->v[QL_CONCURRENT_JOBS] = cfg->quota_concurrent_jobs;
	out->v[QL_JOB_MAX_RUNTIME_S] = cfg->quota_job_max_runtime_s;
	out->v[QL_NETWORK] = cfg->quota_network ? QUOTA_NETWORK_EGRESS : QUOTA_NETWORK_NONE;
	out->v[QL_EGRESS_BYTES_PER_S] = cfg->quota_egress_bytes_per_s; /* -1 = QUOTA_UNLIMITED */
	out->v[QL_JOB_STORAGE_BYTES] = cfg->quota_job_storage_bytes;    /* -1 = QUOTA_UNLIMITED */
}

struct row {
	char *plan;
	struct quota_limits *overrides;
};

static int quota_row(sqlite3_stmt *st, void *arg)
{
	struct row *r = arg;

	snprintf(r->plan, QUOTA_NAME_MAX + 1, "%s", (const char *)sqlite3_column_text(st, 0));
	if (quota_limits_parse((const char *)sqlite3_column_text(st, 1), r->overrides) < 0)
		log_error("unreadable per-user overrides kept as unset");
	return 0;
}

int user_quotas_get(struct db *db, int64_t user_id, char plan[QUOTA_NAME_MAX + 1],
		    struct quota_limits *overrides)
{
	struct row r = {plan, overrides};

	plan[0] = '\0';
	quota_limits_clear(overrides);
	return db_one(db,
		      "SELECT coalesce(p.name, ''), q.overrides FROM user_quotas q"
		      " LEFT JOIN plans p ON p.id = q.plan_id WHERE q.user_id = ?",
		      "i", quota_row, &r, user_id) < 0
		       ? -1
		       : 0;
}

enum quota_change_result user_quotas_set(struct db *db, int64_t user_id, bool set_plan,
					 const char *plan, const struct quota_limits *overrides,
					 int64_t now)
{
	char cur_plan[QUOTA_NAME_MAX + 1], text[1024];
	struct quota_limits cur;
	struct plan p;
	enum quota_change_result rc = QUOTA_OK;


	db_lock(db);
	if (user_quotas_get(db, user_id, cur_plan, &cur) < 0) {
		db_unlock(db);
		return QUOTA_ERROR;
	}
	if (!set_plan)
		plan = cur_plan[0] ? cur_plan : NULL;
	if (plan) {
		int found = plans_find(db, plan, &p);
		rc = found < 0 ? QUOTA_ERROR : found == 0 ? QUOTA_NO_PLAN : QUOTA_OK;
	}
	if (rc == QUOTA_OK &&
	    quota_limits_format(overrides ? overrides : &cur, text, sizeof(text)) < 0)
		rc = QUOTA_ERROR;
	if (rc == QUOTA_OK &&
	    db_exec(db,
		    "INSERT INTO user_quotas (user_id, plan_id, overrides, updated_at)"
		    " VALUES (?1, (SELECT id FROM plans WHERE name = ?2), ?3, ?4)"
		    " ON CONFLICT (user_id) DO UPDATE SET plan_id = excluded.plan_id,"
		    " overrides = excluded.overrides, updated_at = excluded.updated_at",
		    "itti", user_id, plan, text, now) < 0)
		rc = QUOTA_ERROR;
	db_unlock(db);
	return rc;
}

int user_quotas_effective(struct db *db, int64_t user_id, const struct quota_limits *defaults,
			  struct quota_effective *out)
{
	static __thread struct quota_group_plan groups[USER_QUOTAS_MAX_GROUPS];
	char plan_name[QUOTA_NAME_MAX + 1];
	struct quota_inputs in = {.defaults = *defaults, .groups = groups};
	struct plan p;
	int n = 0, rc = 0;

	db_lock(db); /* one consistent view of plans, groups and overrides */
	quota_limits_clear(&in.plan_limits);
	if (user_quotas_get(db, user_id, plan_name, &in.overrides) < 0 ||
	    (n = groups_plans_of_user(db, user_id, groups, USER_QUOTAS_MAX_GROUPS)) < 0)
		rc = -1;
	if (rc == 0 && plan_name[0] && plans_find(db, plan_name, &p) == 1) {
		in.plan = plan_name;
		in.plan_limits = p.limits;
	}
	db_unlock(db);
	if (rc < 0)
		return -1;
	in.n_groups = (size_t)n;
	quota_resolve(&in, out);
	return 0;
}
