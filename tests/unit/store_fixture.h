/* store_fixture.h - a store in a temporary folder with two users, ann and bob:
 * the set-up of the unit tests that need rows owned by users (include after
 * unit.h). Each test gets a fresh store: cmocka's setup/teardown. */
#ifndef LABD_TEST_STORE_FIXTURE_H
#define LABD_TEST_STORE_FIXTURE_H

#include <stdlib.h>

#include "store/db.h"
#include "store/users.h"

struct fixture {
	char dir[64];
	char path[128];
	struct db *db;
	int64_t ann, bob;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct user u;

	assert_non_null(f);
	unit_tempdir(f->dir);
	snprintf(f->path, sizeof(f->path), "%s/labd.db", f->dir);
	assert_int_equal(db_open(f->path, &f->db), 0);
	assert_int_equal(users_create(f->db, "ann", USER_ROLE_USER, "$scrypt$x", 1, &u), 0);
	f->ann = u.id;
	assert_int_equal(users_create(f->db, "bob", USER_ROLE_USER, "$scrypt$x", 1, &u), 0);
	f->bob = u.id;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	db_close(f->db);
	unit_rmdir(f->dir);
	free(f);
	return 0;
}

#endif
