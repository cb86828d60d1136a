/* pages.c - HTML routes, the form login and logout; see pages.h. */
#include "api/pages.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "labd/app.h"
#include "auth/password.h"
#include "store/audit.h"
#include "auth/auth.h"
#include "auth/oidc.h"
#include "http/http.h"
#include "http/static.h"
#include "labd/log.h"
#include "store/sessions.h"

void pages_root(struct http_request *req)
{
	http_reply_redirect(req, "/dashboard");
}

void pages_login_form(struct http_request *req)
{
	static_serve_html(req, MHD_HTTP_OK, "login.html");
}

void pages_dashboard(struct http_request *req)
{
	static_serve_html(req, MHD_HTTP_OK, "dashboard.html");
}

void pages_job(struct http_request *req)
{
	static_serve_html(req, MHD_HTTP_OK, "job.html");
}

void pages_job_report(struct http_request *req)
{
	static_serve_html(req, MHD_HTTP_OK, "job-report.html");
}

void pages_admin(struct http_request *req)
{
	static_serve_html(req, MHD_HTTP_OK, "admin.html");
}

/* Appends "&next=<percent-encoded next>" to a login URL. */
static void append_next(char *url, size_t len, const char *next)
{
	size_t used = strlen(url);

	if (!next || !*next || used + 6 >= len)
		return;
	memcpy(url + used, "&next=", 7);
	http_url_encode(next, url + used + 6, len - used - 6);
}

void pages_login_post(struct http_request *req)
{
	struct app *app = http_app(req);
	/* next holds a whole /open?repo=&path= link (GITSOURCE_*_MAX, encoded) */
	char name[64] = "", password[PASSWORD_MAX_LENGTH + 1] = "", next[2048] = "";
	char secret[SESSION_SECRET_LEN + 1], cookie[256], location[6400];
	struct user user;
	struct session session;
	int64_t retry_after = 0;
	const char *body = http_body(req, NULL);

	if (!http_content_type_is(req, "application/x-www-form-urlencoded")) {
		http_reply_error(req, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type",
				 "post the login form as application/x-www-form-urlencoded");
		return;
	}
	http_form_field(body, "username", name, sizeof(name));
	http_form_field(body, "password", password, sizeof(password));
	if (http_form_field(body, "next", next, sizeof(next)) < 0 || !auth_next_is_local(next))
		snprintf(next, sizeof(next), "/dashboard");
	enum login_result res = auth_login(app, name, password, http_address(req), &user, &session,
					   secret, &retry_after);
	explicit_bzero(password, sizeof(password));
	if (res == LOGIN_OK) {
		auth_cookie_header(app, secret, cookie, sizeof(cookie));
		http_add_header(req, "Set-Cookie", cookie);
		http_reply_redirect(req, next);
		return;
	}
	snprintf(location, sizeof(location), "/login?error=%s",
		 res == LOGIN_THROTTLED	  ? "throttled"
		 : res == LOGIN_BUSY	  ? "busy"
		 : res == LOGIN_INVALID	  ? "invalid"
					  : "internal");
	if (strcmp(next, "/dashboard") != 0)
		append_next(location, sizeof(location), next);
	http_reply_redirect(req, location);
}

void pages_logout_post(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	struct app *app = http_app(req);
	char cookie[256], location[OIDC_LOCATION_MAX];

	if (ident->kind == AUTH_COOKIE) {
		sessions_delete(app->db, ident->session_id);
		api_close_connections(req, APP_CLOSE_SESSION, ident->session_id);
	}
	if (audit_add(app->db, time(NULL), ident->user.name, "logout", ident->user.name,
		      http_address(req), NULL) < 0)
		log_error("audit: logout of %s not recorded", ident->user.name);
	auth_cookie_header(app, NULL, cookie, sizeof(cookie));
	http_add_header(req, "Set-Cookie", cookie);
	/* a single sign-on user is signed out at the provider too, when it can be */
	if (oidc_logout_location(app, &ident->user, location, sizeof(location)) == 1)
		http_reply_redirect(req, location);
	else
		http_reply_redirect(req, "/login");
}
