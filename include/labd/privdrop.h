/* privdrop.h - the root-side preparation and the one-way drop to the labd user.
 * After privdrop_to() the process has no capabilities in any set (bounding and
 * ambient included), no_new_privs, and cannot regain root. */
#ifndef LABD_PRIVDROP_H
#define LABD_PRIVDROP_H

#include <sys/types.h>

struct labd_config;

struct privdrop_user {
	uid_t uid;
	gid_t gid;
	char name[64];
};

/* Looks up the configured system user; -1 (logged) when it does not exist or is root. */
int privdrop_lookup(const char *name, struct privdrop_user *out);
/* As root: creates state_dir if missing, makes it root:<user's group> 0710,
 * makes db/ below it the user's own (0700), moves a database of the old
 * layout (state_dir/labd.db) into db/ once, and gives the database files to
 * the user. -1 (logged) when db/ is a link or both layouts hold a database. */
int privdrop_prepare_state_dir(const char *state_dir, const struct privdrop_user *u);
/* Drops to the user for good. Returns 0, or -1 (logged) - the caller must exit. */
int privdrop_to(const struct privdrop_user *u);

#endif
