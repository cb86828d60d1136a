/* uidmap.c - see uidmap.h. */
#include "supervisor/uidmap.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "labd/log.h"

#define UIDS_FILE "uids.json"

struct uidmap {
	const struct labd_config *cfg;
	char path[CONFIG_PATH_MAX + 16];
	json_t *names;   /* {"alice": 200001, ...} */
	json_t *retired; /* [200005, ...] */
};

struct uidmap *uidmap_new(const struct labd_config *cfg, const char *state_dir)
{
	struct uidmap *m = calloc(1, sizeof(*m));
	json_error_t err;
	json_t *j = NULL;

	if (!m)
		return NULL;
	m->cfg = cfg;
	snprintf(m->path, sizeof(m->path), "%s/%s", state_dir, UIDS_FILE);
	if (access(m->path, F_OK) == 0 && !(j = json_load_file(m->path, JSON_REJECT_DUPLICATES, &err))) {
		log_error("read %s: %s", m->path, err.text);
		free(m);
		return NULL;
	}
	m->names = json_incref(json_object_get(j, "names"));
	m->retired = json_incref(json_object_get(j, "retired"));
	json_decref(j);
	if (!json_is_object(m->names))
		json_decref(m->names), m->names = json_object();
	if (!json_is_array(m->retired))
		json_decref(m->retired), m->retired = json_array();
	return m;
}

void uidmap_free(struct uidmap *m)
{
	if (!m)
		return;
	json_decref(m->names);
	json_decref(m->retired);
	free(m);
}

/* Written to a temp file and renamed: a crash leaves the old or the new record. */
static int save(const struct uidmap *m)
{
	char tmp[sizeof(m->path) + 8];
	json_t *j = json_pack("{s:O,s:O}", "names", m->names, "retired", m->retired);
	char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	int fd = -1, rc = -1;

	json_decref(j);
	snprintf(tmp, sizeof(tmp), "%s.tmp", m->path);
	if (text && (fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600)) >= 0 &&
	    write(fd, text, strlen(text)) == (ssize_t)strlen(text) && fsync(fd) == 0 &&
	    rename(tmp, m->path) == 0)
		rc = 0;
	else
		log_errno("save %s", m->path);
	if (fd >= 0)
		close(fd);
	free(text);
	return rc;
}

static bool in_passwd(uid_t uid)
{
	FILE *f = fopen("/etc/passwd", "re");
	struct passwd *pw;
	bool found = false;

	if (!f)
		return true; /* unknown accounts: refuse rather than guess */
	while (!found && (pw = fgetpwent(f)))
		found = pw->pw_uid == uid;
	fclose(f);
	return found;
}

/* Whether uid lies in a "name:start:count" range of the subuid file. */
static bool in_subuid(const char *path, uid_t uid)
{
	FILE *f = fopen(path, "re");
	char line[512];
	bool found = false;

	if (!f)
		return false; /* no file: no ranges were handed out */
	while (!found && fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		unsigned long long start = strtoull(c1 + 1, NULL, 10), count = strtoull(c2 + 1, NULL, 10);
		found = uid >= start && uid - start < count;
	}
	fclose(f);
	return found;
}

static bool retired(const struct uidmap *m, uid_t uid)
{
	size_t i;
	json_t *v;

	json_array_foreach(m->retired, i, v) {
		if (json_integer_value(v) == (json_int_t)uid)
			return true;
	}
	return false;
}

/* The name that holds uid now, or NULL. */
static const char *holder(const struct uidmap *m, uid_t uid)
{
	const char *name;
	json_t *v;

	json_object_foreach(m->names, name, v) {
		if (json_integer_value(v) == (json_int_t)uid)
			return name;
	}
	return NULL;
}

int uidmap_claim(struct uidmap *m, const char *user, long long user_id, uid_t *uid, char *why,
		 size_t whylen)
{
	json_t *have = json_object_get(m->names, user);
	const char *other;
	uint64_t u = (uint64_t)m->cfg->uid_base + (uint64_t)user_id;

	if (user_id < 1 || (uint64_t)user_id >= m->cfg->uid_count) {
		snprintf(why, whylen, "user id %lld gives uid %" PRIu64 ", outside uid_base %u + uid_count %u",
			 user_id, u, m->cfg->uid_base, m->cfg->uid_count);
		return -EPERM;
	}
	*uid = (uid_t)u;
	if (have && json_integer_value(have) != (json_int_t)u) {
		snprintf(why, whylen, "user %s has uid %lld, not %" PRIu64, user,
			 (long long)json_integer_value(have), u);
		return -EPERM;
	}
	if (have)
		return 0; /* known pair: the host files were checked when it was recorded */
	if ((other = holder(m, *uid)) || retired(m, *uid)) {
		snprintf(why, whylen, "uid %" PRIu64 " belongs to %s", u,
			 other ? other : "a deleted user");
		return -EPERM;
	}
	if (in_passwd(*uid)) {
		snprintf(why, whylen, "uid %" PRIu64 " belongs to an account in /etc/passwd", u);
		return -EPERM;
	}
	if (in_subuid(m->cfg->subuid_file, *uid)) {
		snprintf(why, whylen, "uid %" PRIu64 " lies in a range of %s", u, m->cfg->subuid_file);
		return -EPERM;
	}
	json_object_set_new(m->names, user, json_integer((json_int_t)u));
	if (save(m) < 0) {
		json_object_del(m->names, user);
		snprintf(why, whylen, "the uid record could not be saved");
		return -EIO;
	}
	return 0;
}

int uidmap_retire(struct uidmap *m, const char *user, long long user_id, char *why,
		  size_t whylen)
{
	json_t *have = json_object_get(m->names, user);
	uint64_t u = (uint64_t)m->cfg->uid_base + (uint64_t)user_id;

	if (user_id < 1 || (uint64_t)user_id >= m->cfg->uid_count) {
		snprintf(why, whylen, "user id %lld is outside uid_count %u", user_id,
			 m->cfg->uid_count);
		return -EPERM;
	}
	if (have && json_integer_value(have) != (json_int_t)u) {
		snprintf(why, whylen, "user %s has uid %lld, not %" PRIu64, user,
			 (long long)json_integer_value(have), u);
		return -EPERM;
	}
	if (have)
		json_object_del(m->names, user);
	if (!retired(m, (uid_t)u))
		json_array_append_new(m->retired, json_integer((json_int_t)u));
	return save(m) < 0 ? -EIO : 0;
}
