/* groups_end.c - a course's end (docs/operations.md "Courses"): when a
 * group's expires_at passes, its members' runtimes and jobs stop and their
 * accounts are disabled, unless they are admins or still in a group that has
 * not ended (a student in two courses keeps working while one is live);
 * [runtime] course_retention later, the accounts it disabled are deleted, so
 * their homes are archived (or removed) as [runtime] deleted_home says. */
#include <stdio.h>
#include <time.h>

#include "api/api.h"
#include "config/config.h"
#include "http/http.h"
#include "jobs/jobs.h"
#include "jobs/retention.h"
#include "labd/app.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "runtime/runtime.h"
#include "store/audit.h"
#include "store/groups.h"
#include "store/users.h"

/* Members read per store walk, and groups handled per pass (the rest next). */
#define MEMBERS_BATCH 64
#define GROUPS_PER_PASS 16
/* The pass looks again at least this often (a retention coming due). */
#define LOOK_EVERY_S 300

/* Whether the course's end applies to m: not an admin, in no live group. */
static bool ends_for(const struct group_member *m)
{
	return !m->admin && !m->live_elsewhere;
}

static void disable_member(struct app *app, const char *group, const struct group_member *m,
			   int64_t now)
{
	bool disabled = true;

	if (m->disabled || users_update(app->db, m->name, NULL, &disabled, now) != USERS_OK)
		return;
	if (runtime_end_account(app, m->user_id, "course ended") < 0)
		log_error("course %s: the runtime of %s could not be stopped", group, m->name);
	if (jobs_end_account(app, m->user_id, "course ended") < 0)
		log_error("course %s: the jobs of %s could not all be stopped", group, m->name);
	if (app->close_connections)
		app->close_connections(app, APP_CLOSE_USER, m->user_id);
	if (audit_add(app->db, now, NULL, "user.disable", m->name, NULL, group) < 0)
		log_error("audit: the disabling of %s not recorded", m->name);
}

static void retire_member(struct app *app, const char *group, const struct group_member *m,
			  int64_t now)
{
	if (!m->disabled || users_delete(app->db, m->name) != USERS_OK)
		return;
	/* as api_users_delete: the supervisor ends what is left and retires the home */
	runtime_forget_account(app, m->name, m->user_id);
	jobs_forget_account(app);
	if (app->close_connections)
		app->close_connections(app, APP_CLOSE_USER, m->user_id);
	if (audit_add(app->db, now, NULL, "user.delete", m->name, NULL, group) < 0)
		log_error("audit: the deletion of %s not recorded", m->name);
}

/* Applies fn to every member of the group it concerns; 0 or -1. */
static int each_member(struct app *app, int64_t gid, const char *group, int64_t now,
		       void (*fn)(struct app *, const char *, const struct group_member *, int64_t))
{
	struct group_member batch[MEMBERS_BATCH];
	int64_t after = 0;
	int n;

	do {
		n = groups_members_state(app->db, gid, now, after, batch, MEMBERS_BATCH);
		for (int i = 0; i < n; i++) {
			if (ends_for(&batch[i]))
				fn(app, group, &batch[i], now);
			after = batch[i].user_id;
		}
	} while (n == MEMBERS_BATCH);
	return n < 0 ? -1 : 0;
}

static void end_due(struct app *app, int64_t now)
{
	char name[QUOTA_NAME_MAX + 1];
	int64_t gid;

	for (int k = 0; k < GROUPS_PER_PASS && groups_due_to_end(app->db, now, &gid, name) == 1;
	     k++) {
		if (each_member(app, gid, name, now, disable_member) < 0 ||
		    groups_mark(app->db, gid, false, now) < 0) {
			log_error("course %s: its end could not be applied", name);
			return;
		}
		log_info("course %s ended: its members' accounts are disabled", name);
	}
}

static void retire_due(struct app *app, int64_t now)
{
	int64_t keep = app->cfg->course_retention_s, gid;
	char name[QUOTA_NAME_MAX + 1];

	if (keep < 0)
		return;
	for (int k = 0;
	     k < GROUPS_PER_PASS && groups_due_to_retire(app->db, now - keep, &gid, name) == 1; k++) {
		if (each_member(app, gid, name, now, retire_member) < 0 ||
		    groups_mark(app->db, gid, true, now) < 0) {
			log_error("course %s: its accounts could not be retired", name);
			return;
		}
		log_info("course %s: its disabled accounts are deleted after the retention", name);
	}
}

long long api_groups_end_pass(struct app *app)
{
	int64_t now = time(NULL), next = 0, wait_s = LOOK_EVERY_S;

	end_due(app, now);
	retire_due(app, now);
	if (groups_next_due(app->db, app->cfg->course_retention_s, &next) == 0 && next > 0 &&
	    next - now < wait_s)
		wait_s = next > now ? next - now : 1;
	return clock_ms() + wait_s * 1000LL;
}

json_t *api_course_ends_json(struct http_request *req, int64_t user_id)
{
	const struct app *app = http_app(req);
	struct group_end ends[8];
	json_t *list = json_array();
	int n = http_identity(req)->user.role == USER_ROLE_ADMIN
			? 0 /* a course's end never disables an admin */
			: groups_ends_of_user(app->db, user_id, time(NULL) + app->cfg->course_notice_s,
					      ends, sizeof(ends) / sizeof(ends[0]));
	char at[21];

	for (int i = 0; i < n; i++) {
		api_time(ends[i].expires_at, at);
		json_array_append_new(list, json_pack("{s:s,s:s}", "group", ends[i].group,
						      "expires_at", at));
	}
	return list;
}
