/* plans.h - named sets of limits (the plans table). */
#ifndef LABD_PLANS_H
#define LABD_PLANS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/quota.h"

struct db;

#define PLAN_IMAGE_MAX 32 /* config/images.h IMAGE_NAME_MAX */
/* A kind of GPU device (schema 20): "whole" (a whole card), "share" (a
 * time-sliced share of a card, [gpu] shares) or a MIG profile "<n>g.<m>gb"
 * (an instance of n compute slices and m GB, such as "1g.18gb"). */
#define PLAN_GPU_MAX 16
#define PLAN_GPU_WHOLE "whole"
#define PLAN_GPU_SHARE "share"
#define PLAN_GPU_RULE "\"whole\", \"share\" or a MIG profile <n>g.<m>gb such as \"1g.18gb\""

struct plan {
	int64_t id;
	char name[QUOTA_NAME_MAX + 1];
	struct quota_limits limits;
	char image[PLAN_IMAGE_MAX + 1]; /* an [images] name; "" = the host's root */
	int64_t created_at, updated_at;
	/* the fraction of a preemptible job's second billed (0 to 1; schema 18) */
	double preemptible_rate;
	/* the kind of GPU device its GPU runtimes and jobs get (schema 20) */
	char gpu[PLAN_GPU_MAX];
};

/* Whether kind is a kind of GPU device a plan may name (PLAN_GPU_RULE). Pure. */
bool plans_gpu_ok(const char *kind);
/* Whether a plan giving plan_kind lets a job ask for asked (both valid): the
 * same kind; anything on a "whole" plan (a slice is less than a card); on a
 * MIG plan a profile no larger in compute slices and in memory. A "share" plan
 * allows only shares: it bounds its users to a time slice. Pure. */
bool plans_gpu_allows(const char *plan_kind, const char *asked);

/* Lookups: 1 found, 0 not, -1 error. */
int plans_find(struct db *db, const char *name, struct plan *out);
int plans_find_by_id(struct db *db, int64_t id, struct plan *out);
/* Calls fn for each plan by name; stops when fn returns non-zero. 0 or -1. */
int plans_each(struct db *db, int (*fn)(const struct plan *p, void *ctx), void *ctx);
/* QUOTA_OK (out filled), QUOTA_CONFLICT or QUOTA_ERROR. */
enum quota_change_result plans_create(struct db *db, const char *name,
				      const struct quota_limits *limits, const char *image,
				      int64_t now, struct plan *out);
/* Replaces the limits and the image: QUOTA_OK, QUOTA_NOT_FOUND or QUOTA_ERROR. */
enum quota_change_result plans_update(struct db *db, const char *name,
				      const struct quota_limits *limits, const char *image,
				      int64_t now);
/* Sets a plan's kind of GPU device (plans_gpu_ok, checked by the caller):
 * QUOTA_OK, QUOTA_NOT_FOUND or QUOTA_ERROR. */
enum quota_change_result plans_set_gpu(struct db *db, const char *name, const char *gpu);
/* The kind of GPU device a user's GPU runtimes and jobs get: that of the plan
 * the ledger names for them (their own plan, else their first group's by
 * name), else "whole". Into out (PLAN_GPU_MAX bytes). 0 or -1 (out "whole"). */
int plans_user_gpu(struct db *db, int64_t user_id, char *out, size_t len);
/* Sets a plan's preemptible_rate (0 to 1, checked by the caller):
 * QUOTA_OK, QUOTA_NOT_FOUND or QUOTA_ERROR. */
enum quota_change_result plans_set_preemptible_rate(struct db *db, const char *name,
						    double rate);
/* The image a user's runtime runs on: their own plan's, else that of the first of
 * their groups (by name) whose plan has one, else "" (the host's root). The same
 * precedence as a limit (quota.h). 0 or -1. */
int plans_user_image(struct db *db, int64_t user_id, char *out, size_t len);
/* Deletes an unused plan. QUOTA_IN_USE writes who uses it ("group cs101,
 * user alice", truncated) into who. */
enum quota_change_result plans_delete(struct db *db, const char *name, char *who,
				      size_t wholen);

#endif
