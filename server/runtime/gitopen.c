/* gitopen.c - see gitopen.h. Every step is one request to the runtime's
 * Jupyter: the contents API for folders, jupyterlab-git's /git/<folder>/...
 * routes for git itself. */
#include "runtime/gitopen.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "labd/clock.h"
#include "runtime/jupyter.h"

#define ANSWER_MAX_BYTES (256 * 1024) /* a git status of a big tree, a folder listing */
#define FOLDER_TRIES 9			/* <name>, <name>-2 ... <name>-9 */
#define NOTEBOOK_PATH_ENCODED_MAX (3 * GITSOURCE_PATH_MAX + 1)

struct call {
	const struct gitopen_target *t;
	long long deadline_ms;
	char *answer; /* ANSWER_MAX_BYTES */
	int status;   /* of the last answer; 0 when there was none */
	json_t *json; /* the last answer parsed; NULL when not JSON */
};

enum folder_kind { FOLDER_FREE, FOLDER_SAME, FOLDER_OTHER, FOLDER_ERROR };

const char *gitopen_outcome_name(enum gitopen_outcome o)
{
	static const char *const names[] = {"cloned", "updated", "current",
					    "kept",   "failed",  "unsupported"};
	return (unsigned)o < sizeof(names) / sizeof(names[0]) ? names[o] : "failed";
}

/* METHOD /user/<user>/<path...> with json_body (NULL: none). The status, or
 * -1 when Jupyter did not answer in time. */
__attribute__((format(printf, 4, 5))) static int ask(struct call *c, const char *method,
						      const char *json_body, const char *fmt, ...)
{
	char path[JUPYTER_HEAD_MAX / 2];
	long long left = c->deadline_ms - clock_ms();
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	json_decref(c->json);
	c->json = NULL;
	c->status = 0;
	if (n < 0 || (size_t)n >= sizeof(path) || left <= 0 ||
	    jupyter_send(c->t->socket_path, c->t->peer_uid, method, c->t->user, path, c->t->token,
			 json_body,
			 (int)(left > 0x7fffffff ? 0x7fffffff : left), &c->status, c->answer,
			 ANSWER_MAX_BYTES) < 0)
		return -1;
	c->json = json_loads(c->answer, 0, NULL);
	return c->status;
}

static const char *answer_string(struct call *c, const char *key)
{
	return json_string_value(json_object_get(c->json, key));
}

__attribute__((format(printf, 3, 4))) static void say(struct gitopen_result *out,
						     enum gitopen_outcome o, const char *fmt, ...)
{
	va_list ap;

	out->outcome = o;
	va_start(ap, fmt);
	vsnprintf(out->message, sizeof(out->message), fmt, ap);
	va_end(ap);
}

/* git's own words from a failed jupyterlab-git answer, on one line. */
static const char *git_words(struct call *c, char *buf, size_t len)
{
	const char *m = answer_string(c, "message");

	snprintf(buf, len, "%s", m && *m ? m : "no message");
	for (char *p = buf; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
	return buf;
}

/* Percent-encodes a notebook path for a URL, keeping its slashes. */
static void encode_path(const char *in, char *out, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *in && o + 4 < len; in++) {
		unsigned char ch = (unsigned char)*in;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		    strchr("-._~/", ch)) {
			out[o++] = (char)ch;
		} else {
			out[o++] = '%';
			out[o++] = hex[ch >> 4];
			out[o++] = hex[ch & 15];
		}
	}
	out[o] = '\0';
}

/* Whether folder (a plain name under the home) is free, a clone of url, or
 * something else. */
static enum folder_kind folder_kind(struct call *c, const char *folder, const char *url)
{
	const char *prefix, *type;
	json_t *remote;
	size_t i;

	if (ask(c, "GET", NULL, "api/contents/%s?content=0", folder) == 404)
		return FOLDER_FREE;
	if (c->status != 200)
		return FOLDER_ERROR;
	type = answer_string(c, "type");
	if (!type || strcmp(type, "directory") != 0)
		return FOLDER_OTHER;
	/* The folder must be the top of its own repository, not a folder inside
	 * one the home happens to be. */
	if (ask(c, "POST", "{}", "git/%s/show_prefix", folder) != 200)
		return c->status == 500 ? FOLDER_OTHER : FOLDER_ERROR;
	prefix = answer_string(c, "path");
	if (!prefix || *prefix)
		return FOLDER_OTHER;
	if (ask(c, "GET", NULL, "git/%s/remote/show", folder) != 200)
		return FOLDER_OTHER;
	json_array_foreach(json_object_get(c->json, "remotes"), i, remote) {
		const char *name = json_string_value(json_object_get(remote, "name"));
		const char *rurl = json_string_value(json_object_get(remote, "url"));
		if (name && rurl && strcmp(name, "origin") == 0 && gitsource_same_repo(rurl, url))
			return FOLDER_SAME;
	}
	return FOLDER_OTHER;
}

/* Clones url into folder by way of a fresh staging folder. */
static void clone_into(struct call *c, const char *folder, const char *url,
		       struct gitopen_result *out)
{
	char staging[32], body[GITSOURCE_URL_MAX + 128], words[256], from[3 * 256 + 1];
	const char *made = NULL;
	json_t *entry, *req;
	unsigned char rnd[4];
	size_t i;

	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		say(out, GITOPEN_FAILED, "could not make a staging folder name");
		return;
	}
	/* Not hidden: the contents API refuses to rename from a hidden path. */
	snprintf(staging, sizeof(staging), "labd-open-%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2],
		 rnd[3]);
	if (ask(c, "PUT", "{\"type\":\"directory\"}", "api/contents/%s", staging) != 201 &&
	    c->status != 200) {
		say(out, GITOPEN_FAILED, "could not make a folder in your home (Jupyter answered %d)",
		    c->status);
		return;
	}
	req = json_pack("{s:s,s:b,s:b}", "clone_url", url, "versioning", 1, "submodules", 0);
	char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	snprintf(body, sizeof(body), "%s", text ? text : "{}");
	free(text);
	if (ask(c, "POST", body, "git/%s/clone", staging) != 200) {
		say(out, GITOPEN_FAILED, "git clone failed: %s",
		    c->status ? git_words(c, words, sizeof(words)) : "Jupyter did not answer in time");
		goto out;
	}
	if (ask(c, "GET", NULL, "api/contents/%s?content=1", staging) == 200)
		json_array_foreach(json_object_get(c->json, "content"), i, entry)
			made = json_string_value(json_object_get(entry, "name"));
	if (!made) {
		say(out, GITOPEN_FAILED, "git clone made no folder");
		goto out;
	}
	/* made lives in c->json, which the next ask frees */
	encode_path(made, from, sizeof(from));
	snprintf(body, sizeof(body), "{\"path\":\"%s\"}", folder);
	if (ask(c, "PATCH", body, "api/contents/%s/%s", staging, from) != 200) {
		say(out, GITOPEN_FAILED, "could not move the clone to ~/%s (Jupyter answered %d)",
		    folder, c->status);
		goto out;
	}
	say(out, GITOPEN_CLONED, "cloned into ~/%s", folder);
out:
	/* Empty by now: git removes a failed clone, and a good one was moved. */
	ask(c, "DELETE", NULL, "api/contents/%s", staging);
}

/* Counts the tracked files status lists as changed (untracked ones are
 * not: a fast-forward that would overwrite one stops by itself). */
static int changed_files(struct call *c, char *first, size_t len)
{
	json_t *file;
	size_t i;
	int n = 0;

	json_array_foreach(json_object_get(c->json, "files"), i, file) {
		const char *x = json_string_value(json_object_get(file, "x"));
		const char *to = json_string_value(json_object_get(file, "to"));
		if (x && strcmp(x, "?") == 0)
			continue;
		if (n++ == 0)
			snprintf(first, len, "%s", to ? to : "?");
	}
	return n;
}

/* Fetches, then fast-forwards folder when nothing local would be touched. */
static void update(struct call *c, const char *folder, struct gitopen_result *out)
{
	char words[256], first[128] = "", upstream[256];
	json_int_t ahead, behind, state;
	const char *remote;
	int changed;

	if (ask(c, "POST", "{}", "git/%s/remote/fetch", folder) != 200) {
		say(out, GITOPEN_KEPT, "~/%s was not updated: git fetch failed: %s", folder,
		    c->status ? git_words(c, words, sizeof(words)) : "Jupyter did not answer in time");
		return;
	}
	if (ask(c, "POST", "{}", "git/%s/status", folder) != 200 || !c->json) {
		say(out, GITOPEN_KEPT, "~/%s was not updated: git status failed", folder);
		return;
	}
	/* copied: the pull's answer replaces the status's */
	remote = answer_string(c, "remote");
	snprintf(upstream, sizeof(upstream), "%s", remote ? remote : "");
	ahead = json_integer_value(json_object_get(c->json, "ahead"));
	behind = json_integer_value(json_object_get(c->json, "behind"));
	state = json_integer_value(json_object_get(c->json, "state"));
	changed = changed_files(c, first, sizeof(first));
	if (state != 0)
		say(out, GITOPEN_KEPT, "~/%s was not updated: a merge or rebase is under way there",
		    folder);
	else if (!remote)
		say(out, GITOPEN_KEPT,
		    "~/%s was not updated: its current branch follows no remote branch", folder);
	else if (behind == 0)
		say(out, GITOPEN_CURRENT, "~/%s is up to date with %s", folder, upstream);
	else if (changed > 0)
		say(out, GITOPEN_KEPT,
		    "~/%s was not updated: %d changed file%s (%s%s) would be touched; commit or "
		    "discard your changes and open the link again",
		    folder, changed, changed == 1 ? "" : "s", first, changed > 1 ? ", ..." : "");
	else if (ahead > 0)
		say(out, GITOPEN_KEPT,
		    "~/%s was not updated: it has %lld commit%s of yours that %s lacks and %lld new "
		    "one%s there (the histories diverged)",
		    folder, (long long)ahead, ahead == 1 ? "" : "s", upstream, (long long)behind,
		    behind == 1 ? "" : "s");
	else if (ask(c, "POST", "{}", "git/%s/pull", folder) != 200)
		say(out, GITOPEN_KEPT, "~/%s was not updated: git pull failed: %s", folder,
		    c->status ? git_words(c, words, sizeof(words)) : "Jupyter did not answer in time");
	else
		say(out, GITOPEN_UPDATED, "~/%s was updated from %s (%lld new commit%s)", folder,
		    upstream, (long long)behind, behind == 1 ? "" : "s");
}

/* Picks the folder: the first of <name>, <name>-2... that is free or a clone
 * of url. FOLDER_ERROR when Jupyter did not answer. */
static enum folder_kind pick_folder(struct call *c, const char *url, struct gitopen_result *out)
{
	char name[GITSOURCE_FOLDER_MAX - 2];

	if (gitsource_folder(url, name, sizeof(name)) < 0)
		return FOLDER_ERROR;
	for (int i = 1; i <= FOLDER_TRIES; i++) {
		if (i == 1)
			snprintf(out->folder, sizeof(out->folder), "%s", name);
		else
			snprintf(out->folder, sizeof(out->folder), "%s-%d", name, i);
		enum folder_kind k = folder_kind(c, out->folder, url);
		if (k != FOLDER_OTHER)
			return k;
	}
	return FOLDER_OTHER;
}

void gitopen_run(const struct gitopen_target *t, const char *url, const char *path,
		 int timeout_ms, struct gitopen_result *out)
{
	char encoded[NOTEBOOK_PATH_ENCODED_MAX];
	struct call c = {.t = t, .deadline_ms = clock_ms() + timeout_ms};

	memset(out, 0, sizeof(*out));
	if (!(c.answer = malloc(ANSWER_MAX_BYTES))) {
		say(out, GITOPEN_FAILED, "out of memory");
		return;
	}
	/* jupyterlab-git answers its settings route on any server that loaded it;
	 * Notebook 6 and a bare Jupyter Server answer 404. */
	if (ask(&c, "GET", NULL, "git/settings") != 200) {
		if (c.status == 404)
			say(out, GITOPEN_NO_GIT,
			    "this runtime has no jupyterlab-git, which opening a repository needs "
			    "(it runs the classic Notebook or a bare Jupyter Server)");
		else
			say(out, GITOPEN_FAILED, "your runtime did not answer (status %d)", c.status);
		goto out;
	}
	switch (pick_folder(&c, url, out)) {
	case FOLDER_FREE:
		clone_into(&c, out->folder, url, out);
		break;
	case FOLDER_SAME:
		update(&c, out->folder, out);
		break;
	case FOLDER_OTHER:
		say(out, GITOPEN_FAILED,
		    "~/%s and the next %d names all hold something else: rename one and open the "
		    "link again",
		    out->folder, FOLDER_TRIES - 1);
		out->folder[0] = '\0';
		goto out;
	case FOLDER_ERROR:
		say(out, GITOPEN_FAILED, "your runtime did not answer in time");
		out->folder[0] = '\0';
		goto out;
	}
	if (out->outcome == GITOPEN_FAILED) {
		out->folder[0] = '\0';
		goto out;
	}
	encode_path(path, encoded, sizeof(encoded));
	out->notebook_found =
		ask(&c, "GET", NULL, "api/contents/%s/%s?content=0", out->folder, encoded) == 200;
out:
	json_decref(c.json);
	free(c.answer);
}
