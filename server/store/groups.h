/* groups.h - groups of users (a course), each with an optional plan, and
 * their members (the groups and group_members tables). */
#ifndef LABD_GROUPS_H
#define LABD_GROUPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/quota.h"

struct db;

#define GROUPS_MAX_NAMES 256 /* members named in one change */

struct group {
	int64_t id;
	char name[QUOTA_NAME_MAX + 1];
	char plan[QUOTA_NAME_MAX + 1]; /* "" = none */
	int64_t created_at;
	int64_t expires_at; /* the course's end; 0 = never */
	int64_t ended_at;   /* when its members were disabled; 0 = not yet */
};

/* A change to a group: its plan (when set_plan; plan NULL = none) and members
 * to add and remove, by user name. */
struct group_change {
	bool set_plan;
	const char *plan;
	bool set_expires; /* expires_at: a Unix time, 0 = never */
	int64_t expires_at;
	const char *const *add;
	size_t n_add;
	const char *const *remove;
	size_t n_remove;
};

/* 1 found, 0 not, -1 error. */
int groups_find(struct db *db, const char *name, struct group *out);
/* Calls fn per group by name; 0 or -1. */
int groups_each(struct db *db, int (*fn)(const struct group *g, void *ctx), void *ctx);
/* Calls fn with each member's name, in order; 0 or -1. */
int groups_members_each(struct db *db, int64_t group_id,
			int (*fn)(const char *user, void *ctx), void *ctx);
/* Calls fn with the name of each group user_id is in; 0 or -1. */
int groups_of_user_each(struct db *db, int64_t user_id,
			int (*fn)(const char *group, void *ctx), void *ctx);
/* The user's groups that have a plan, with the plan's limits, up to max;
 * returns how many, or -1. */
int groups_plans_of_user(struct db *db, int64_t user_id, struct quota_group_plan *out,
			 size_t max);
/* Both in one transaction; nothing changes on failure. QUOTA_NO_PLAN /
 * QUOTA_NO_USER write the missing name into missing[QUOTA_NAME_MAX + 1]. */
enum quota_change_result groups_create(struct db *db, const char *name,
				       const struct group_change *c, int64_t now,
				       char missing[QUOTA_NAME_MAX + 1]);
enum quota_change_result groups_update(struct db *db, const char *name,
				       const struct group_change *c,
				       char missing[QUOTA_NAME_MAX + 1]);
/* QUOTA_OK or QUOTA_NOT_FOUND (members go with it). */
enum quota_change_result groups_delete(struct db *db, const char *name);

/* Course ends (docs/operations.md "Courses"). When the next end or
 * retirement is due into *at (0 = none): the earliest expires_at of a group
 * not ended yet, or expires_at + keep of one ended and not retired (keep < 0:
 * never retired); 0 or -1. */
int groups_next_due(struct db *db, int64_t keep, int64_t *at);
/* One group to end now (expires_at <= now, not ended), or one ended whose
 * expires_at <= before and whose accounts are not retired yet: 1 found (id
 * and name written), 0 none, -1 error. */
int groups_due_to_end(struct db *db, int64_t now, int64_t *id, char name[QUOTA_NAME_MAX + 1]);
int groups_due_to_retire(struct db *db, int64_t before, int64_t *id,
			 char name[QUOTA_NAME_MAX + 1]);
/* Records the end (retired false: ended_at) or the retirement (retired_at). */
int groups_mark(struct db *db, int64_t group_id, bool retired, int64_t now);

/* A member as the course's end sees it. */
struct group_member {
	int64_t user_id;
	char name[QUOTA_NAME_MAX + 1];
	bool admin, disabled;
	bool live_elsewhere; /* in another group that has not expired at now */
};
/* Up to max members with user id > after_id, by id; how many, or -1. */
int groups_members_state(struct db *db, int64_t group_id, int64_t now, int64_t after_id,
			 struct group_member *out, size_t max);

/* A group of the user's that ends by a time. */
struct group_end {
	char group[QUOTA_NAME_MAX + 1];
	int64_t expires_at;
};
/* The user's groups with expires_at <= until (ended ones too) whose end
 * disables them (no group of theirs lasts longer), earliest first; how many
 * (up to max), or -1. */
int groups_ends_of_user(struct db *db, int64_t user_id, int64_t until, struct group_end *out,
			size_t max);

#endif
