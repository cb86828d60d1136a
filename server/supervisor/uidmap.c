/* uidmap.c - see uidmap.h. */
#include "supervisor/uidmap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>
#include <unistd.h>

#include "config/config.h"
#include "labd/log.h"

#define UIDS_FILE "uids.json"
#define BLOCK 65536u               /* a base is a multiple of it, as subordinate ranges are */
#define LEGACY_BASE 200000u        /* the default before auto: installs that used it keep it */
#define USERADD_SUB_MAX 600100000u /* shadow's SUB_UID_MAX and SUB_GID_MAX when unsaid */
#define TOP_UID 0xfffffffeull      /* (uid_t)-1 is "no uid" */

struct uidmap {
	const struct labd_config *cfg;
	char path[CONFIG_PATH_MAX + 16];
	unsigned base;   /* the uid_base recorded (the one first used) */
	json_t *names;   /* {"alice": 200001, ...} */
	json_t *retired; /* [200005, ...] */
};

static int save(const struct uidmap *m);

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
	bool recorded = json_is_integer(json_object_get(j, "uid_base"));
	m->base = recorded ? (unsigned)json_integer_value(json_object_get(j, "uid_base")) : cfg->uid_base;
	json_decref(j);
	if (!json_is_object(m->names))
		json_decref(m->names), m->names = json_object();
	if (!json_is_array(m->retired))
		json_decref(m->retired), m->retired = json_array();
	/* the base is recorded on the first start, so that auto never moves it later */
	if (!recorded && save(m) < 0) {
		uidmap_free(m);
		return NULL;
	}
	if (m->base != cfg->uid_base)
		log_warn("[runtime] uid_base %u differs from %u recorded in %s: users recorded there "
			 "keep their uids and are refused until it is set back",
			 cfg->uid_base, m->base, m->path);
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
	json_t *j = json_pack("{s:O,s:O,s:I}", "names", m->names, "retired", m->retired, "uid_base",
			      (json_int_t)m->base);
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

/* The highest uid + 1 that a "name:start:count" line of path covers (0: none or no file). */
static uint64_t ranges_top(const char *path)
{
	FILE *f = fopen(path, "re");
	char line[512];
	uint64_t top = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		uint64_t end = strtoull(c1 + 1, NULL, 10) + strtoull(c2 + 1, NULL, 10);
		top = end > top ? end : top;
	}
	fclose(f);
	return top;
}

/* The value of "KEY <number>" in login.defs, or dflt. */
static uint64_t defs_value(const char *path, const char *key, uint64_t dflt)
{
	FILE *f = path ? fopen(path, "re") : NULL;
	char line[512], name[64];
	unsigned long long v;

	if (!f)
		return dflt;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, " %63s %llu", name, &v) == 2 && strcmp(name, key) == 0)
			dflt = v;
	fclose(f);
	return dflt;
}

int uidmap_auto_base(const struct uidmap_host_files *hf, unsigned count, unsigned *base)
{
	FILE *f = fopen(hf->passwd, "re");
	struct passwd *pw;
	uint64_t top, b;

	if (!f)
		return -EIO;
	/* the maxima are the last uid useradd may hand out: the range starts above */
	top = defs_value(hf->login_defs, "SUB_UID_MAX", USERADD_SUB_MAX) + 1;
	top = MAX(top, defs_value(hf->login_defs, "SUB_GID_MAX", USERADD_SUB_MAX) + 1);
	while ((pw = fgetpwent(f)))
		if ((uint64_t)pw->pw_uid < TOP_UID + 1 - BLOCK) /* not nfsnobody's top block */
			top = MAX(top, (uint64_t)pw->pw_uid + 1);
	fclose(f);
	top = MAX(top, ranges_top(hf->subuid));
	top = MAX(top, ranges_top(hf->subgid));
	b = (top + BLOCK - 1) / BLOCK * BLOCK;
	if (b + count > TOP_UID)
		return -ERANGE;
	*base = (unsigned)b;
	return 0;
}

/* The first account of passwd with a uid in base..base+count-1, as words in out. */
static bool account_inside(const char *passwd, uint64_t base, uint64_t count, char *out, size_t len)
{
	FILE *f = fopen(passwd, "re");
	struct passwd *pw;
	bool found = false;

	while (f && !found && (pw = fgetpwent(f)))
		if ((found = pw->pw_uid >= base && pw->pw_uid - base < count))
			snprintf(out, len, "account %s (uid %u)", pw->pw_name, (unsigned)pw->pw_uid);
	if (f)
		fclose(f);
	return found;
}

/* The first "name:start:count" range of path meeting base..base+count-1, in out. */
static bool range_inside(const char *path, uint64_t base, uint64_t count, char *out, size_t len)
{
	FILE *f = fopen(path, "re");
	char line[512];
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		uint64_t start = strtoull(c1 + 1, NULL, 10), n = strtoull(c2 + 1, NULL, 10);
		if ((found = n && start < base + count && base < start + n))
			snprintf(out, len, "the range %" PRIu64 "-%" PRIu64 " of %.*s in %s", start,
				 start + n - 1, (int)(c1 - line), line, path);
	}
	if (f)
		fclose(f);
	return found;
}

/* Says so at start when the range in use meets an account or a subordinate range:
 * every lab user whose uid lands there is refused (uidmap_claim). */
static void warn_overlaps(const struct labd_config *cfg)
{
	char what[400];

	if (account_inside("/etc/passwd", cfg->uid_base, cfg->uid_count, what, sizeof(what)) ||
	    range_inside(cfg->subuid_file, cfg->uid_base, cfg->uid_count, what, sizeof(what)) ||
	    range_inside(cfg->subgid_file, cfg->uid_base, cfg->uid_count, what, sizeof(what)))
		log_warn("[runtime] uid_base %u: the sandbox uids %u-%u meet %s: a lab user whose "
			 "uid lands there cannot start a sandbox; set uid_base = auto (a new install) "
			 "or a base above it",
			 cfg->uid_base, cfg->uid_base, cfg->uid_base + cfg->uid_count - 1, what);
}

/* The base recorded in path: 1 with *base set, 0 when the record has none or there is
 * no record, -1 when it cannot be read. */
static int recorded_base(const char *path, unsigned *base)
{
	json_error_t err;
	json_t *j, *v;
	int rc = 0;

	if (access(path, F_OK) < 0)
		return 0;
	if (!(j = json_load_file(path, JSON_REJECT_DUPLICATES, &err)))
		return -1;
	v = json_object_get(j, "uid_base");
	if (json_is_integer(v) && json_integer_value(v) >= 1000 && json_integer_value(v) < (json_int_t)TOP_UID) {
		*base = (unsigned)json_integer_value(v);
		rc = 1;
	}
	json_decref(j);
	return rc;
}

/* Whether the state dir holds a home image (an install from before auto). */
static bool has_homes(const char *state_dir)
{
	char path[CONFIG_PATH_MAX + 16];
	struct dirent *e;
	bool found = false;
	DIR *d;

	snprintf(path, sizeof(path), "%s/homes", state_dir);
	if (!(d = opendir(path)))
		return false;
	while (!found && (e = readdir(d)))
		found = e->d_name[0] != '.';
	closedir(d);
	return found;
}

int uidmap_settle_base(struct labd_config *cfg, char *err, size_t errlen)
{
	const struct uidmap_host_files hf = {"/etc/passwd", cfg->subuid_file, cfg->subgid_file,
					     "/etc/login.defs"};
	char path[CONFIG_PATH_MAX + 16];
	unsigned base;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", cfg->state_dir, UIDS_FILE);
	if (cfg->uid_base == 0) {
		const char *how = "recorded in " UIDS_FILE;
		if ((rc = recorded_base(path, &base)) < 0) {
			snprintf(err, errlen, "%s cannot be read: its uid_base is not known", path);
			return -1;
		}
		if (rc == 0 && (access(path, F_OK) == 0 || has_homes(cfg->state_dir))) {
			base = LEGACY_BASE;
			how = "the former default: this state dir's homes predate auto";
		} else if (rc == 0 && (rc = uidmap_auto_base(&hf, cfg->uid_count, &base)) < 0) {
			snprintf(err, errlen, "[runtime] uid_base = auto: %s",
				 rc == -ERANGE ? "no free range of uid_count uids is left above the "
						 "host's accounts and subordinate ranges"
					       : "/etc/passwd cannot be read");
			return -1;
		} else if (rc == 0) {
			how = "chosen now, above the host's accounts and subordinate ranges";
		}
		cfg->uid_base = base;
		log_info("sandbox uids %u-%u ([runtime] uid_base = auto: %s)", base,
			 base + cfg->uid_count - 1, how);
	}
	if ((uint64_t)cfg->uid_base + cfg->uid_count > TOP_UID) {
		snprintf(err, errlen, "[runtime] uid_base %u + uid_count %u passes the last uid",
			 cfg->uid_base, cfg->uid_count);
		return -1;
	}
	warn_overlaps(cfg);
	return 0;
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
