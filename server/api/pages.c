/* pages.c - HTML routes, the form login and logout, and static files; see pages.h. */
#include "api/pages.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "labd/app.h"
#include "store/audit.h"
#include "http/http.h"
#include "labd/log.h"
#include "store/sessions.h"

static const char *const mime_types[][2] = {
	{".html", "text/html; charset=utf-8"},
	{".css", "text/css; charset=utf-8"},
	{".js", "text/javascript; charset=utf-8"},
	{".mjs", "text/javascript; charset=utf-8"},
	{".json", "application/json"},
	{".svg", "image/svg+xml"},
	{".png", "image/png"},
	{".ico", "image/x-icon"},
	{".woff2", "font/woff2"},
	{".txt", "text/plain; charset=utf-8"},
	{".map", "application/json"},
};

const char *pages_mime_type(const char *name)
{
	const char *dot = strrchr(name, '.');

	for (size_t i = 0; dot && i < sizeof(mime_types) / sizeof(mime_types[0]); i++)
		if (strcmp(dot, mime_types[i][0]) == 0)
			return mime_types[i][1];
	return "application/octet-stream";
}

bool pages_path_safe(const char *rel)
{
	const char *seg = rel;

	if (!*rel || strlen(rel) > 255)
		return false;
	for (const unsigned char *p = (const unsigned char *)rel; *p; p++)
		if (*p < 0x20 || *p == 0x7f || *p == '\\')
			return false;
	while (seg) {
		const char *slash = strchr(seg, '/');
		size_t len = slash ? (size_t)(slash - seg) : strlen(seg);
		/* Empty, ".", ".." and hidden segments never name a served file. */
		if (len == 0 || seg[0] == '.')
			return false;
		seg = slash ? slash + 1 : NULL;
	}
	return true;
}

/* Opens rel under the web root; the kernel refuses any escape (symlinks,
 * "..", absolute paths, mount crossings) even if pages_path_safe missed one. */
static int open_beneath(int root_fd, const char *rel)
{
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	return (int)syscall(SYS_openat2, root_fd, rel, &how, sizeof(how));
}

/* Serves web/<rel>; cacheable (static assets) or revalidated (pages). */
static void serve_file(struct http_request *req, unsigned status, const char *rel, bool cacheable)
{
	struct stat st;
	char etag[64], modified[64];
	struct tm tm;
	int fd = pages_path_safe(rel) ? open_beneath(req->app->web_root_fd, rel) : -1;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		if (fd >= 0)
			close(fd);
		if (strcmp(rel, "404.html") == 0) /* no page to show: plain JSON */
			http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "not found");
		else
			pages_serve_html(req, MHD_HTTP_NOT_FOUND, "404.html");
		return;
	}
	snprintf(etag, sizeof(etag), "\"%llx-%llx\"", (unsigned long long)st.st_mtime,
		 (unsigned long long)st.st_size);
	const char *inm = http_header(req, "If-None-Match");
	if (status == MHD_HTTP_OK && inm && strcmp(inm, etag) == 0) {
		close(fd);
		http_reply_empty(req, MHD_HTTP_NOT_MODIFIED);
	} else {
		http_reply_fd(req, status, pages_mime_type(rel), fd, (size_t)st.st_size);
	}
	gmtime_r(&st.st_mtime, &tm);
	strftime(modified, sizeof(modified), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	http_add_header(req, "ETag", etag);
	http_add_header(req, "Last-Modified", modified);
	http_add_header(req, "Cache-Control", cacheable ? "public, max-age=3600" : "no-cache");
}

void pages_serve_html(struct http_request *req, unsigned status, const char *name)
{
	serve_file(req, status, name, false);
}

void pages_static(struct http_request *req)
{
	char rel[300];

	if (snprintf(rel, sizeof(rel), "static/%s", req->path + strlen("/static/")) >=
	    (int)sizeof(rel)) {
		pages_serve_html(req, MHD_HTTP_NOT_FOUND, "404.html");
		return;
	}
	serve_file(req, MHD_HTTP_OK, rel, true);
}

void pages_root(struct http_request *req)
{
	http_reply_redirect(req, "/dashboard");
}

void pages_login_form(struct http_request *req)
{
	pages_serve_html(req, MHD_HTTP_OK, "login.html");
}

void pages_dashboard(struct http_request *req)
{
	pages_serve_html(req, MHD_HTTP_OK, "dashboard.html");
}

void pages_admin(struct http_request *req)
{
	pages_serve_html(req, MHD_HTTP_OK, "admin.html");
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
	char name[64] = "", password[PASSWORD_MAX_LENGTH + 1] = "", next[512] = "";
	char secret[SESSION_SECRET_LEN + 1], cookie[256], location[1024];
	struct user user;
	struct session session;
	int64_t retry_after = 0;
	const char *body = buf_str(&req->body);

	if (!http_content_type_is(req, "application/x-www-form-urlencoded")) {
		http_reply_error(req, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type",
				 "post the login form as application/x-www-form-urlencoded");
		return;
	}
	http_form_field(body, "username", name, sizeof(name));
	http_form_field(body, "password", password, sizeof(password));
	if (http_form_field(body, "next", next, sizeof(next)) < 0 || !auth_next_is_local(next))
		snprintf(next, sizeof(next), "/dashboard");
	enum login_result res = auth_login(req->app, name, password, req->address, &user, &session,
					   secret, &retry_after);
	explicit_bzero(password, sizeof(password));
	if (res == LOGIN_OK) {
		auth_cookie_header(req->app, secret, cookie, sizeof(cookie));
		http_add_header(req, "Set-Cookie", cookie);
		http_reply_redirect(req, next);
		return;
	}
	snprintf(location, sizeof(location), "/login?error=%s",
		 res == LOGIN_LOCKED	  ? "locked"
		 : res == LOGIN_THROTTLED ? "throttled"
		 : res == LOGIN_INVALID	  ? "invalid"
					  : "internal");
	if (strcmp(next, "/dashboard") != 0)
		append_next(location, sizeof(location), next);
	http_reply_redirect(req, location);
}

void pages_logout_post(struct http_request *req)
{
	char cookie[256];

	if (req->auth.kind == AUTH_COOKIE)
		sessions_delete(req->app->db, req->auth.session_id);
	if (audit_add(req->app->db, time(NULL), req->auth.user.name, "logout", req->auth.user.name,
		      req->address, NULL) < 0)
		log_error("audit: logout of %s not recorded", req->auth.user.name);
	auth_cookie_header(req->app, NULL, cookie, sizeof(cookie));
	http_add_header(req, "Set-Cookie", cookie);
	http_reply_redirect(req, "/login");
}
