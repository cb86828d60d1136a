/* uidmap.h - the supervisor's own record of which lab user owns which host uid.
 *
 * The web process names a user and an id in each start; root takes the host
 * uid (uid_base + id) only if it lies in the configured range, belongs to no
 * account in /etc/passwd and to no range in the subuid file, and agrees with
 * what it recorded before: a name keeps its uid, a uid keeps its name, and a
 * deleted user's uid is retired for good. Kept in <state>/uids.json (root-only),
 * so a restart forgets nothing. Single-threaded (the supervisor's loop). */
#ifndef LABD_SUPERVISOR_UIDMAP_H
#define LABD_SUPERVISOR_UIDMAP_H

#include <stddef.h>
#include <sys/types.h>

struct labd_config;
struct uidmap;

/* Loads the record under state_dir (empty when there is none). NULL on
 * failure (logged): an unreadable record is not silently forgotten. */
struct uidmap *uidmap_new(const struct labd_config *cfg, const char *state_dir);
void uidmap_free(struct uidmap *m);

/* Checks (user, user_id) and records the pair; *uid is the host uid.
 * 0, or -EPERM with why (a sentence naming the rule) filled. */
int uidmap_claim(struct uidmap *m, const char *user, long long user_id, uid_t *uid, char *why,
		 size_t whylen);
/* The user was deleted: the name is free again, its uid never is (also when
 * no runtime ever claimed it). 0, or -EPERM when the name holds another uid
 * (why filled), -EIO when the record could not be saved. */
int uidmap_retire(struct uidmap *m, const char *user, long long user_id, char *why,
		  size_t whylen);

#endif
