/* oidc.c - single sign-on's routes: the login page's question whether it is
 * on, the start of a sign-in, the provider's callback and the logout at the
 * provider (auth/oidc.h). A
 * refused sign-in lands on the login page, which names the reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "auth/auth.h"
#include "auth/oidc.h"
#include "config/config.h"
#include "http/http.h"
#include "labd/app.h"
#include "labd/log.h"

void api_sso(struct http_request *req)
{
	const char *name = oidc_display_name(http_app(req));

	http_reply_json(req, MHD_HTTP_OK,
			name ? json_pack("{s:b,s:s,s:s}", "enabled", 1, "name", name, "url",
					 "/oidc/login")
			     : json_pack("{s:b}", "enabled", 0));
}

/* To the login page, naming why (login.js says it in words). */
static void back_to_login(struct http_request *req, const char *code)
{
	char location[160];

	snprintf(location, sizeof(location), "/login?error=sso&reason=%s", code);
	http_reply_redirect(req, location);
}

void pages_oidc_login(struct http_request *req)
{
	struct app *app = http_app(req);
	const char *next = http_query(req, "next");
	char location[OIDC_LOCATION_MAX], cookie[256], err[320];
	int rc;

	if (!app->oidc) {
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found",
				 "single sign-on is not configured ([oidc] issuer)");
		return;
	}
	if (!next || !auth_next_is_local(next) || strlen(next) >= OIDC_NEXT_MAX)
		next = "/dashboard";
	if ((rc = oidc_begin(app, req, next, location, sizeof(location), cookie, sizeof(cookie), err,
			     sizeof(err))) < 0) {
		log_warn("oidc: a sign-in could not begin: %s", err);
		back_to_login(req, "unavailable");
		return;
	}
	http_add_header(req, "Set-Cookie", cookie);
	http_reply_redirect(req, location);
}

/* The provider's groups become the user's labd groups, and with them the
 * plans: a storage quota that changed is applied to the home as an admin's
 * change of the group would (grown online, or at the next start). */
static void mirror_groups(struct http_request *req, struct oidc_outcome *out)
{
	int64_t before = api_storage_quota(req, out->user.id), after;

	if (oidc_account_mirror_groups(http_app(req), &out->user, out->claims) < 0)
		log_error("oidc: the groups of %s could not be mirrored", out->user.name);
	else if ((after = api_storage_quota(req, out->user.id)) != before)
		api_storage_apply(req, out->user.name, out->user.id, before, after);
	json_decref(out->claims);
	out->claims = NULL;
}

void pages_oidc_callback(struct http_request *req)
{
	struct app *app = http_app(req);
	struct oidc_outcome *out;
	char cookie[256];
	enum oidc_finish_result res;

	if (!app->oidc) {
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found",
				 "single sign-on is not configured ([oidc] issuer)");
		return;
	}
	if (!(out = calloc(1, sizeof(*out)))) {
		http_reply_internal(req);
		return;
	}
	res = oidc_finish(app, req, out);
	/* the state is used up either way */
	oidc_cookie_clear(app, cookie, sizeof(cookie));
	http_add_header(req, "Set-Cookie", cookie);
	if (res == OIDC_SIGNED_IN) {
		mirror_groups(req, out);
		auth_cookie_header(app, out->secret, cookie, sizeof(cookie));
		http_add_header(req, "Set-Cookie", cookie);
		http_reply_redirect(req, out->next[0] ? out->next : "/dashboard");
	} else {
		back_to_login(req, out->why.code ? out->why.code : "internal");
	}
	explicit_bzero(out, sizeof(*out));
	free(out);
}

/* RP-initiated logout, after labd's own (the login page comes here): to the
 * provider's end_session_endpoint, which asks the user and comes back to the
 * login page. Public: it ends nothing of labd's. */
void pages_oidc_logout(struct http_request *req)
{
	char location[OIDC_LOCATION_MAX];

	if (oidc_end_session_url(http_app(req), req, location, sizeof(location)) == 1)
		http_reply_redirect(req, location);
	else
		http_reply_redirect(req, "/login");
}
