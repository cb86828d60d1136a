/* user_quotas.h - a user's own plan and per-user overrides (the user_quotas
 * table), and the gathering of everything quota_resolve() needs for a user. */
#ifndef LABD_USER_QUOTAS_H
#define LABD_USER_QUOTAS_H

#include <stdbool.h>
#include <stdint.h>

#include "store/quota.h"

struct db;
struct labd_config;

/* The default plan: [runtime]'s lengths and sizes and [quota]'s windows. */
void user_quotas_defaults(const struct labd_config *cfg, struct quota_limits *out);

/* The user's plan name ("" = none) and overrides; a user without a row has
 * neither. 0 or -1. */
int user_quotas_get(struct db *db, int64_t user_id, char plan[QUOTA_NAME_MAX + 1],
		    struct quota_limits *overrides);
/* Sets the plan (when set_plan; NULL = none) and/or replaces the overrides
 * (when overrides is not NULL) in one statement. QUOTA_OK, QUOTA_NO_PLAN or
 * QUOTA_ERROR. */
enum quota_change_result user_quotas_set(struct db *db, int64_t user_id, bool set_plan,
					 const char *plan, const struct quota_limits *overrides,
					 int64_t now);
/* Resolves user_id's effective limits over defaults (every limit set). 0 or -1. */
int user_quotas_effective(struct db *db, int64_t user_id, const struct quota_limits *defaults,
			  struct quota_effective *out);

#endif
