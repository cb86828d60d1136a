/* users_import.h - many users created at once from a CSV (api/users_import.c):
 * every row in one transaction, so a bad row creates nobody. */
#ifndef LABD_USERS_IMPORT_H
#define LABD_USERS_IMPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/quota.h"

struct db;

#define USERS_IMPORT_GROUPS 16 /* groups named in one row */

/* One user to create (role user, enabled). */
struct users_import_row {
	const char *name;
	const char *email; /* "" = none */
	const char *plan;  /* the user's own plan; "" = none */
	const char *groups[USERS_IMPORT_GROUPS];
	size_t n_groups;
	const char *hash; /* "" = no local password: the account signs in by SSO only */
};

enum users_import_check {
	USERS_IMPORT_OK,
	USERS_IMPORT_NAME_TAKEN, /* a user of that name exists */
	USERS_IMPORT_NO_GROUP,   /* groups[which] does not exist */
	USERS_IMPORT_NO_PLAN,    /* the plan does not exist */
};

struct users_import_result {
	enum users_import_check check;
	size_t which; /* the group, for USERS_IMPORT_NO_GROUP */
};

/* Creates each row's user with its e-mail, plan and group memberships in one
 * transaction, writing results[i] for every row; commits only when commit is
 * true and every row is USERS_IMPORT_OK, else rolls back (a dry run). Groups
 * and plans must exist. Returns the number of bad rows, or -1 on a store
 * error (nothing changed). */
int users_import(struct db *db, const struct users_import_row *rows, size_t n, bool commit,
		 int64_t now, struct users_import_result *results);

#endif
