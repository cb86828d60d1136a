/* gitsource.h - what "Open in labd" accepts from a link (/open?repo=&path=):
 * pure checks of the repository URL and the notebook path, and the folder
 * name a repository gets in the home. No I/O: the link is anybody's text, so
 * every byte is checked here before anything reaches a runtime. */
#ifndef LABD_GITSOURCE_H
#define LABD_GITSOURCE_H

#include <stddef.h>

#define GITSOURCE_URL_MAX 512 /* bytes of a repository URL */
#define GITSOURCE_PATH_MAX 512 /* bytes of a notebook path */
#define GITSOURCE_FOLDER_MAX 64 /* bytes of a folder name, suffix included */

/* NULL when url may be cloned, else why not (a sentence for the user).
 * Only http:// and https:// URLs with a host: a link is written by someone
 * else, and git's other transports act locally (file://, plain paths: copy
 * another folder of the home), run commands (ext::) or use the user's own
 * keys (ssh). No credentials, query, fragment, '%', spaces or controls
 * (git prompts are off, and jupyterlab-git percent-decodes the URL). */
const char *gitsource_check_url(const char *url);
/* NULL when path is a notebook path inside a repository: relative, no empty,
 * "." or ".." segment, no backslash or control byte; else why not. */
const char *gitsource_check_path(const char *path);
/* The folder named after url's last path segment without ".git" (the name
 * git clone picks), bytes other than [A-Za-z0-9._-] made '-', no leading
 * '.'. 0, or -1 when url names no such segment. url must have passed
 * gitsource_check_url. */
int gitsource_folder(const char *url, char *out, size_t len);
/* True when a remote URL recorded in a clone names url: equal but for a
 * trailing "/" or ".git" on either side. */
int gitsource_same_repo(const char *remote, const char *url);

#endif
