/* backup_verify.c - a backup's manifest read and every file in it checked; see
 * backup_int.h. The manifest is read as untrusted input: restore copies each path
 * it names into a new state dir, so a path must be one of the layout's names,
 * never a link, never outside the backup. */
#include "web/backup_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/slurmlogs.h"
#include "labd/log.h"
#include "labd/parse.h"

/* "db/labd.db", "uids.json", "homes/<id>.img", "homes/<user name>.img" (the old
 * layout's), "joblogs/<id>.log" or a Slurm head's "joblogs/<id>.log.hosts" and
 * "joblogs/<id>.log.nodes". */
static bool layout_path(const char *p)
{
	static const struct {
		const char *dir, *suffix;
		bool names_too;
	} keyed[] = {{"homes/", ".img", true},
		     {"joblogs/", ".log", false},
		     {"joblogs/", ".log" SLURMLOGS_OFFSETS, false},
		     {"joblogs/", ".log" SLURMLOGS_NODES, false}};
	char key[64];

	if (strcmp(p, BACKUP_DB) == 0 || strcmp(p, "uids.json") == 0)
		return true;
	for (size_t i = 0; i < sizeof(keyed) / sizeof(keyed[0]); i++) {
		size_t d = strlen(keyed[i].dir), s = strlen(keyed[i].suffix), n = strlen(p);
		if (strncmp(p, keyed[i].dir, d) != 0 || n <= d + s || n - d - s >= sizeof(key) ||
		    strcmp(p + n - s, keyed[i].suffix) != 0)
			continue;
		snprintf(key, sizeof(key), "%.*s", (int)(n - d - s), p + d);
		return (strspn(key, "0123456789") == strlen(key) && strlen(key) < 20) ||
		       (keyed[i].names_too && parse_user_name_ok(key));
	}
	return false;
}

/* One file: 0 when its size and checksum are the manifest's, else -1 (printed). */
static int check_file(const char *dir, json_t *f)
{
	const char *rel = json_string_value(json_object_get(f, "path"));
	const char *want = json_string_value(json_object_get(f, "sha256"));
	json_t *size = json_object_get(f, "size");
	char path[BACKUP_PATH_MAX], hex[65];
	struct stat st;
	uint64_t got;
	int fd, rc;

	if (!rel || !want || !json_is_integer(size) || !layout_path(rel))
		return log_error("manifest: a file entry is malformed (%s)", rel ? rel : "no path");
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = log_error("%s: missing or not a regular file", rel);
		goto out;
	}
	if ((rc = backup_sha256_fd(fd, hex, &got)) < 0) {
		rc = log_error("%s: %s", rel, strerror(-rc));
		goto out;
	}
	if (got != (uint64_t)json_integer_value(size))
		rc = log_error("%s: %llu bytes, the manifest says %lld", rel, (unsigned long long)got,
			       (long long)json_integer_value(size));
	else if (strcmp(hex, want) != 0)
		rc = log_error("%s: checksum mismatch (the file changed since the backup)", rel);
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

int backup_verify(const char *dir, json_t **out)
{
	char path[BACKUP_PATH_MAX];
	json_error_t err;
	json_t *m, *files, *f;
	size_t i;
	int bad = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, BACKUP_MANIFEST);
	if (!(m = json_load_file(path, JSON_REJECT_DUPLICATES, &err)))
		return log_error("%s: %s (no manifest: the backup is incomplete)", path, err.text);
	files = json_object_get(m, "files");
	if (json_integer_value(json_object_get(m, "format")) != BACKUP_FORMAT ||
	    !json_is_array(files) || !json_is_integer(json_object_get(m, "schema_version"))) {
		json_decref(m);
		return log_error("%s: not a labd backup manifest of format %d", path, BACKUP_FORMAT);
	}
	json_array_foreach(files, i, f) {
		if (check_file(dir, f) < 0)
			bad++;
	}
	if (bad) {
		log_error("backup %s: %d of %zu files do not match the manifest", dir, bad,
			  json_array_size(files));
		json_decref(m);
		return -1;
	}
	*out = m;
	return 0;
}
