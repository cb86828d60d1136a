/* plans.h - named sets of limits (the plans table). */
#ifndef LABD_PLANS_H
#define LABD_PLANS_H

#include <stdint.h>

#include "store/quota.h"

struct db;

#define PLAN_IMAGE_MAX 32 /* config/images.h IMAGE_NAME_MAX */

struct plan {
	int64_t id;
	char name[QUOTA_NAME_MAX + 1];
	struct quota_limits limits;
	char image[PLAN_IMAGE_MAX + 1]; /* an [images] name; "" = the host's root */
	int64_t created_at, updated_at;
	/* the fraction of a preemptible job's second billed (0 to 1; schema 18) */
	double preemptible_rate;
};

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
