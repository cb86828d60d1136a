/* quota_storage.c - the storage quota against the user's home: how much is
 * used (the supervisor reads the home: statfs when mounted, else the image's
 * superblock), and a change of a user's effective storage_bytes applied to
 * the home (grown online or at the next start) or refused when it would fall
 * below what the home holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "config/config.h"
#include "http/http.h"
#include "labd/app.h"
#include "labd/log.h"
#include "runtime/runtime.h"
#include "store/user_quotas.h"
#include "store/users.h"

int64_t api_storage_quota(struct http_request *req, int64_t user_id)
{
	struct quota_limits defaults;
	struct quota_effective e;

	user_quotas_defaults(http_app(req)->cfg, &defaults);
	if (user_quotas_effective(http_app(req)->db, user_id, &defaults, &e) < 0)
		return QUOTA_UNSET;
	return e.v[QL_STORAGE_BYTES];
}

/* Bytes the home holds: 0 when there is none yet, -1 when unknown. */
static int64_t home_used(struct http_request *req, const char *user, int64_t user_id)
{
	struct backend_home h;
	int rc = runtime_home_usage(http_app(req), user, user_id, &h);

	if (rc < 0) {
		log_warn("home usage of %s unknown: %s", user, strerror(-rc));
		return -1;
	}
	return h.exists ? h.used_bytes : 0;
}

void api_storage_json(struct http_request *req, const char *user, int64_t user_id, json_t *out)
{
	int64_t quota = api_storage_quota(req, user_id), used = home_used(req, user, user_id);
	json_t *used_obj = json_object_get(out, "used"), *rem = json_object_get(out, "remaining");
	bool limited = quota >= 0;

	json_object_set_new(out, "storage",
			    json_pack("{s:o,s:o}", "used_bytes",
				      used < 0 ? json_null() : json_integer(used), "quota_bytes",
				      limited ? json_integer(quota) : json_null()));
	if (used_obj)
		json_object_set_new(used_obj, "storage_bytes",
				    used < 0 ? json_null() : json_integer(used));
	if (rem)
		json_object_set_new(rem, "storage_bytes",
				    limited && used >= 0
					    ? json_integer(quota > used ? quota - used : 0)
					    : json_null());
}

static const char *applied_name(enum backend_home_applied a)
{
	return a == BACKEND_HOME_ONLINE ? "online"
	       : a == BACKEND_HOME_UNCHANGED ? "unchanged"
					     : "next_start";
}

enum api_storage_check api_storage_check(struct http_request *req, const char *user,
					 int64_t user_id, int64_t before, int64_t after)
{
	int64_t used;

	/* raising, or unlimited: nothing to refuse */
	if (after == QUOTA_UNLIMITED || (before != QUOTA_UNLIMITED && after >= before))
		return API_STORAGE_OK;
	if ((used = home_used(req, user, user_id)) < 0) {
		http_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, "home_unknown",
				 "storage_bytes of %s cannot be lowered now: the home's use is "
				 "unknown (it is being unmounted, or the supervisor did not "
				 "answer); try again; nothing was changed",
				 user);
		return API_STORAGE_REFUSED;
	}
	if (used > after) {
		http_reply_error(req, MHD_HTTP_CONFLICT, "storage_below_use",
				 "storage_bytes %lld for user %s is below the %lld bytes their home "
				 "holds now; nothing was changed",
				 (long long)after, user, (long long)used);
		return API_STORAGE_REFUSED;
	}
	return API_STORAGE_OK;
}

const char *api_storage_apply(struct http_request *req, const char *user, int64_t user_id,
			      int64_t before, int64_t after)
{
	enum backend_home_applied applied = BACKEND_HOME_UNCHANGED;
	int64_t size = after == QUOTA_UNLIMITED ? (int64_t)http_app(req)->cfg->home_size_max_bytes
						: after;
	int rc;

	if (after == before || (after < 0 && after != QUOTA_UNLIMITED))
		return NULL; /* unchanged, or unknown (QUOTA_UNSET) */
	if ((rc = runtime_home_resize(http_app(req), user, user_id, size, &applied)) < 0) {
		/* the quota is recorded; the next start sizes the home from it */
		log_warn("home of %s not resized now (%s): at its next start", user,
			 strerror(-rc));
		applied = BACKEND_HOME_NEXT_START;
	}
	return applied_name(applied);
}

/* ---- changes that touch many users (a plan's limits, a group's plan) ---- */

/* Users read for one snapshot; a lab with more is not refused, only not
 * checked past this (logged). */
#define SNAPSHOT_USERS_MAX 100000

struct snapshot_walk {
	struct http_request *req;
	struct api_storage_snapshot *s;
	bool failed;
};

static int snap_user(const struct user *u, void *ctx)
{
	struct snapshot_walk *w = ctx;
	struct api_storage_snapshot *s = w->s;

	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		void *more = cap > SNAPSHOT_USERS_MAX ? NULL : realloc(s->u, cap * sizeof(*s->u));
		if (!more) {
			log_warn("storage check: more users than %d, the rest are not checked",
				 SNAPSHOT_USERS_MAX);
			return 1;
		}
		s->u = more;
		s->cap = cap;
	}
	s->u[s->n].id = u->id;
	snprintf(s->u[s->n].name, sizeof(s->u[s->n].name), "%s", u->name);
	if ((s->u[s->n].before = api_storage_quota(w->req, u->id)) == QUOTA_UNSET) {
		w->failed = true;
		return 1;
	}
	s->n++;
	return 0;
}

int api_storage_snapshot(struct http_request *req, struct api_storage_snapshot *s)
{
	struct snapshot_walk w = {req, s, false};

	*s = (struct api_storage_snapshot){0};
	if (users_each(http_app(req)->db, snap_user, &w) < 0 || w.failed) {
		api_storage_snapshot_release(s);
		http_reply_internal(req);
		return -1;
	}
	return 0;
}

enum api_storage_check api_storage_recheck(struct http_request *req,
					   struct api_storage_snapshot *s)
{
	for (size_t i = 0; i < s->n; i++) {
		if ((s->u[i].after = api_storage_quota(req, s->u[i].id)) == QUOTA_UNSET) {
			http_reply_internal(req);
			return API_STORAGE_REFUSED;
		}
		if (api_storage_check(req, s->u[i].name, s->u[i].id, s->u[i].before,
				      s->u[i].after) != API_STORAGE_OK)
			return API_STORAGE_REFUSED;
	}
	return API_STORAGE_OK;
}

json_t *api_storage_apply_report(struct http_request *req, const struct api_storage_snapshot *s)
{
	json_t *out = json_array();

	for (size_t i = 0; i < s->n; i++) {
		int64_t after = s->u[i].after;
		const char *applied;

		if (after == s->u[i].before ||
		    !(applied = api_storage_apply(req, s->u[i].name, s->u[i].id, s->u[i].before,
						  after)))
			continue;
		json_array_append_new(out, json_pack("{s:s,s:o,s:s}", "user", s->u[i].name,
						     "quota_bytes",
						     after == QUOTA_UNLIMITED ? json_null()
									      : json_integer(after),
						     "applied", applied));
	}
	return out;
}

void api_storage_apply_all(struct http_request *req, const struct api_storage_snapshot *s)
{
	json_decref(api_storage_apply_report(req, s));
}

void api_storage_snapshot_release(struct api_storage_snapshot *s)
{
	free(s->u);
	*s = (struct api_storage_snapshot){0};
}
