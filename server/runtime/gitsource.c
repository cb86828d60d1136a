/* gitsource.c - see gitsource.h. */
#include "runtime/gitsource.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

/* The bytes allowed in a repository URL: RFC 3986's unreserved and reserved
 * sets without '%' (see gitsource_check_url), '?', '#' and '@' (checked as
 * parts of their own). */
static bool url_byte_ok(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c != '\0' && strchr("-._~:/[]!$&'()*+,;=", c) != NULL);
}

static const char *after_scheme(const char *url)
{
	if (strncasecmp(url, "https://", 8) == 0)
		return url + 8;
	if (strncasecmp(url, "http://", 7) == 0)
		return url + 7;
	return NULL;
}

const char *gitsource_check_url(const char *url)
{
	const char *rest, *slash;

	if (!url || !*url)
		return "give the repository's URL";
	if (strlen(url) > GITSOURCE_URL_MAX)
		return "the repository URL is too long";
	if (!(rest = after_scheme(url)))
		return "only http:// and https:// repository URLs can be opened";
	for (const char *p = url; *p; p++) {
		if (*p == '@')
			return "the repository URL must not carry a user name or password";
		if (*p == '?' || *p == '#')
			return "the repository URL must not have a query or fragment";
		if (*p == '%')
			return "the repository URL must not contain percent-encoded bytes";
		if (!url_byte_ok((unsigned char)*p))
			return "the repository URL contains a byte a URL cannot hold";
	}
	slash = strchr(rest, '/');
	if (slash == rest || *rest == '\0')
		return "the repository URL has no host";
	if (!slash)
		return "the repository URL names no repository";
	return NULL;
}

const char *gitsource_check_path(const char *path)
{
	const char *seg;

	if (!path || !*path)
		return "give the notebook's path in the repository";
	if (strlen(path) > GITSOURCE_PATH_MAX)
		return "the notebook path is too long";
	if (*path == '/')
		return "the notebook path must be relative to the repository";
	for (const char *p = path; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '\\')
			return "the notebook path contains a control byte or a backslash";
	for (seg = path; seg; seg = strchr(seg, '/') ? strchr(seg, '/') + 1 : NULL) {
		size_t n = strcspn(seg, "/");
		if (n == 0)
			return "the notebook path has an empty segment";
		if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return "the notebook path must not contain . or .. segments";
	}
	return NULL;
}

/* The length of s without the suffix, when s ends with it. */
static size_t strip(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n >= k && strncmp(s + n - k, suffix, k) == 0 ? n - k : n;
}

int gitsource_folder(const char *url, char *out, size_t len)
{
	const char *rest = after_scheme(url), *path, *seg;
	size_t n, o = 0;

	if (!rest || !(path = strchr(rest, '/')) || len == 0)
		return -1;
	n = strlen(path);
	while (n > 0 && path[n - 1] == '/')
		n--;
	n = strip(path, n, ".git");
	while (n > 0 && path[n - 1] == '/')
		n--;
	for (seg = path + n; seg > path && seg[-1] != '/'; seg--)
		;
	for (; seg < path + n && o + 1 < len; seg++) {
		char c = *seg;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
		if (o == 0 && c == '.')
			continue; /* a hidden folder is one the contents API will not show */
		out[o++] = ok ? c : '-';
	}
	out[o] = '\0';
	return o > 0 ? 0 : -1;
}

/* url's length without a trailing "/" or ".git" (or both). */
static size_t base_length(const char *url)
{
	size_t n = strlen(url);
	while (n > 0 && url[n - 1] == '/')
		n--;
	return strip(url, n, ".git");
}

int gitsource_same_repo(const char *remote, const char *url)
{
	size_t a = base_length(remote), b = base_length(url);
	return a == b && strncmp(remote, url, a) == 0;
}
