/* uidmap.h - the supervisor's own record of which lab user owns which host uid.
 *
 * The web process names a user and an id in each start; root takes the host
 * uid (uid_base + id) only if it lies in the configured range, belongs to no
 * account in /etc/passwd and to no range in the subuid file, and agrees with
 * what it recorded before: a name keeps its uid, a uid keeps its name, and a
 * deleted user's uid is retired for good. Kept in <state>/uids.json (root-only),
 * so a restart forgets nothing, with the base of the range once chosen. Single-threaded
 * (the supervisor's loop). */
#ifndef LABD_SUPERVISOR_UIDMAP_H
#define LABD_SUPERVISOR_UIDMAP_H

#include <stddef.h>
#include <sys/types.h>

struct labd_config;
struct uidmap;

/* The host files a base must stay clear of (uidmap_auto_base). */
struct uidmap_host_files {
	const char *passwd;     /* every account's uid */
	const char *subuid;     /* "name:start:count" ranges handed to accounts */
	const char *subgid;
	const char *login_defs; /* SUB_UID_MAX, SUB_GID_MAX: where useradd hands out more */
};

/* [runtime] uid_base = auto: the first multiple of 65536 above every account's uid,
 * every subordinate range and the top of the ranges useradd will hand out (login_defs'
 * SUB_UID_MAX and SUB_GID_MAX, shadow's 600100000 where it says none), so neither a
 * second login account nor the next one added lands in labd's range. An account of
 * 4294967294 or 65534 (nobody) counts like any other. 0 with *base set, -ERANGE when no
 * range of count uids fits below 2^32 - 1, -EIO when passwd cannot be read. */
int uidmap_auto_base(const struct uidmap_host_files *f, unsigned count, unsigned *base);

/* Fixes cfg->uid_base before anything reads it (at start, before the supervisor and
 * the web process run): an explicit one stays; auto (0) takes the base recorded in
 * <state>/uids.json, else 200000 (the former default) when that record or a home exists
 * without one (an install from before auto: its homes' uids never move), else
 * uidmap_auto_base on the host's files (cfg->subuid_file, cfg->subgid_file). The choice
 * is recorded by uidmap_new. Then warns, naming it, about any account or subordinate
 * range inside the range. 0, or -1 with err filled. */
int uidmap_settle_base(struct labd_config *cfg, char *err, size_t errlen);

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
