/* static.c - files from the web root: pages and /static/ assets, opened
 * beneath the root by the kernel's rules; see static.h. */
#include "http/static.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "http/http.h"
#include "labd/app.h"

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

const char *static_mime_type(const char *name)
{
	const char *dot = strrchr(name, '.');

	for (size_t i = 0; dot && i < sizeof(mime_types) / sizeof(mime_types[0]); i++)
		if (strcmp(dot, mime_types[i][0]) == 0)
			return mime_types[i][1];
	return "application/octet-stream";
}

bool static_path_safe(const char *rel)
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
 * "..", absolute paths, mount crossings) even if static_path_safe missed one. */
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
	int fd = static_path_safe(rel) ? open_beneath(http_app(req)->web_root_fd, rel) : -1;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		if (fd >= 0)
			close(fd);
		if (strcmp(rel, "404.html") == 0) /* no page to show: plain JSON */
			http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "not found");
		else
			static_serve_html(req, MHD_HTTP_NOT_FOUND, "404.html");
		return;
	}
	snprintf(etag, sizeof(etag), "\"%llx-%llx\"", (unsigned long long)st.st_mtime,
		 (unsigned long long)st.st_size);
	const char *inm = http_header(req, "If-None-Match");
	if (status == MHD_HTTP_OK && inm && strcmp(inm, etag) == 0) {
		close(fd);
		http_reply_empty(req, MHD_HTTP_NOT_MODIFIED);
	} else {
		http_reply_fd(req, status, static_mime_type(rel), fd, (size_t)st.st_size);
	}
	gmtime_r(&st.st_mtime, &tm);
	strftime(modified, sizeof(modified), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	http_add_header(req, "ETag", etag);
	http_add_header(req, "Last-Modified", modified);
	http_add_header(req, "Cache-Control", cacheable ? "public, max-age=3600" : "no-cache");
}

void static_serve_html(struct http_request *req, unsigned status, const char *name)
{
	serve_file(req, status, name, false);
}

void static_serve(struct http_request *req)
{
	char rel[300];

	if (snprintf(rel, sizeof(rel), "static/%s", http_path(req) + strlen("/static/")) >=
	    (int)sizeof(rel)) {
		static_serve_html(req, MHD_HTTP_NOT_FOUND, "404.html");
		return;
	}
	serve_file(req, MHD_HTTP_OK, rel, true);
}
