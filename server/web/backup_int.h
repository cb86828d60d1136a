/* backup_int.h - the parts of the backup CLI (backup.h) the files share: sparse
 * copies and checksums, freezing a mounted home, the store's copy, the manifest. */
#ifndef LABD_WEB_BACKUP_INT_H
#define LABD_WEB_BACKUP_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define BACKUP_MANIFEST "manifest.json"
#define BACKUP_SUMS "SHA256SUMS"
#define BACKUP_FORMAT 1
#define BACKUP_DB "db/labd.db"
#define BACKUP_PATH_MAX 4096

/* Copies in (size bytes) into out, holes kept as holes (SEEK_DATA/SEEK_HOLE, then
 * copy_file_range), out truncated to size. Gives up with -ETIMEDOUT once
 * CLOCK_MONOTONIC passes deadline_ns (0: none). 0 or a negative errno. */
int backup_copy_sparse(int in, int out, off_t size, int64_t deadline_ns);
/* SHA-256 of everything in fd (holes read as zeros, without reading them) as 64
 * hex digits into hex, its size into *size. 0 or a negative errno. */
int backup_sha256_fd(int fd, char hex[65], uint64_t *size);
/* backup_copy_sparse of the file at src into a new file dst (O_EXCL, 0600),
 * synced. 0 or a negative errno (logged); dst is removed on failure. */
int backup_copy_file(const char *src, const char *dst);
/* dir made with mode, or found empty: 1 made, 0 found empty, -1 (logged) when
 * it cannot be made or read; -ENOTEMPTY (not logged) when it holds anything. */
int backup_new_dir(const char *dir, mode_t mode);

/* Copies the image of a mounted home (mnt its mount point) into the new file
 * dst with the file system frozen (FIFREEZE) for at most max_s seconds: a
 * watchdog process thaws it past that, or as soon as this process dies. A copy
 * the watchdog cut short is an error. 0 or a negative errno (logged). */
int backup_copy_frozen(const char *mnt, const char *image, const char *dst, unsigned max_s);

/* The store at src (db/labd.db, opened read-only) copied consistently through SQLite's backup API into the new
 * self-contained file dst; its schema version into *schema. 0 or -1 (logged). */
int backup_db_copy(const char *src, const char *dst, int *schema);
/* The schema version of the store file path, or -1 (logged). */
int backup_db_schema(const char *path);
/* The id of the user named name in the store at path: 1 found, 0 none, -1 error. */
int backup_db_user_id(const char *path, const char *name, long long *id);

/* Reads dir's manifest into *out (caller frees with json_decref) and checks every
 * file it names: size and SHA-256, and that each path stays inside dir. Prints
 * each mismatch; 0 when all match, -1 otherwise. */
int backup_verify(const char *dir, json_t **out);

/* Gives every file of the unmounted image owned by host uid (or gid) from to
 * host uid to (backup_reown.c). 0 or -1 (logged). */
int backup_reown(const char *state_dir, const char *image, uid_t from, uid_t to);

/* `labd restore DIR --state-dir NEW` and `labd restore-home USER --from IMAGE`
 * (backup_restore.c): argv[0] is the subcommand; the exit status, 2 for a usage
 * error. */
struct labd_config;
int backup_restore(const struct labd_config *cfg, int argc, char **argv);
int backup_restore_home(const struct labd_config *cfg, int argc, char **argv);

#endif
