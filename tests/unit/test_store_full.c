/* The store on a full disk: a real SQLite file on a small tmpfs (in a private
 * mount namespace, so nothing outlives the test) filled by the test. Writes
 * fail cleanly and say so (db_full, db_room), a COMMIT that fails leaves no
 * transaction open on the shared connection, audit entries are held and
 * written in order once there is room, and the file stays whole. Needs root
 * (mount); skipped without it. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sqlite3.h>
#include <sys/mount.h>

#include "store/audit.h"
#include "store/db.h"

#define DISK_BYTES "4m"
#define ENTRIES 64

struct fixture {
	char dir[64];
	char path[128];
	char filler[128];
	struct db *db;
};

static bool mounted;

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	*state = NULL;
	unit_tempdir(f->dir);
	if (!mounted || mount("labd-unit-full", f->dir, "tmpfs", 0, "size=" DISK_BYTES) < 0) {
		unit_rmdir(f->dir);
		free(f);
		return 0; /* the test skips */
	}
	snprintf(f->path, sizeof(f->path), "%s/labd.db", f->dir);
	snprintf(f->filler, sizeof(f->filler), "%s/filler", f->dir);
	assert_int_equal(db_open(f->path, &f->db), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (!f)
		return 0;
	db_close(f->db);
	umount2(f->dir, MNT_DETACH);
	unit_rmdir(f->dir);
	free(f);
	return 0;
}

/* Fills the file system with zeros until ENOSPC. */
static void fill(const char *path)
{
	static const char zeros[4096];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	while (write(fd, zeros, sizeof(zeros)) == (ssize_t)sizeof(zeros))
		;
	while (write(fd, zeros, 1) == 1)
		;
	assert_int_equal(errno, ENOSPC);
	close(fd);
}

static int count_audit(struct db *db)
{
	int n = -1;
	assert_int_equal(db_one(db, "SELECT count(*) FROM audit", "", db_row_int, &n), 1);
	return n;
}

static void assert_whole(const char *path)
{
	sqlite3 *raw;
	sqlite3_stmt *st;

	assert_int_equal(sqlite3_open_v2(path, &raw, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(raw, "PRAGMA integrity_check", -1, &st, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
	sqlite3_finalize(st);
	sqlite3_close(raw);
}

/* A detail large enough that a few entries need new pages (and WAL frames). */
static const char *big_detail(void)
{
	static char detail[3000];
	memset(detail, 'x', sizeof(detail) - 1);
	return detail;
}

/* Adds entries until one finds the disk full: the WAL may have room left
 * from before (a reset WAL is reused in place), so not the first one. */
static int add_until_full(struct db *db, int *added)
{
	char target[16];

	for (*added = 0; *added < ENTRIES * 16; (*added)++) {
		snprintf(target, sizeof(target), "e%d", *added);
		assert_int_equal(audit_add(db, 1000 + *added, "t", "test.entry", target, NULL,
					   big_detail()),
				 0); /* written, or held: never lost */
		if (db_full(db))
			return ++*added;
	}
	return 0;
}

static void test_full_disk_fails_cleanly_and_resumes(void **state)
{
	struct fixture *f = *state;
	int added, held;

	if (!f)
		skip();
	assert_int_equal(db_room(f->db), 0);
	assert_false(db_full(f->db));
	fill(f->filler);
	/* SQLite's own failure says so (db_room has not looked yet) */
	assert_true(add_until_full(f->db, &added) > 0);
	assert_int_equal(db_room(f->db), -ENOSPC);
	assert_true(db_full(f->db));
	held = audit_flush(f->db);
	assert_true(held >= 1); /* the entry that met the full disk, at least */
	assert_int_equal(count_audit(f->db), added - held); /* reads go on */

	/* a transaction whose COMMIT (or a statement in it) fails: none stays open */
	db_lock(f->db);
	assert_int_equal(db_begin(f->db), 0);
	int rc = 0;
	for (int i = 0; i < ENTRIES && rc >= 0; i++)
		rc = db_exec(f->db, "INSERT INTO audit (time, action, detail) VALUES (?, ?, ?)",
			     "itt", (int64_t)i, "test.txn", big_detail());
	if (rc >= 0)
		rc = db_commit(f->db);
	else
		db_rollback(f->db);
	assert_true(rc < 0);
	assert_int_equal(db_begin(f->db), 0); /* no transaction was left open */
	db_rollback(f->db);
	db_unlock(f->db);
	assert_whole(f->path);

	/* space returns: held entries go in first, in order, then new ones */
	assert_int_equal(unlink(f->filler), 0);
	assert_int_equal(db_room(f->db), 0);
	assert_false(db_full(f->db));
	assert_int_equal(audit_add(f->db, 5000, "t", "test.after", "after", NULL, NULL), 0);
	assert_int_equal(audit_flush(f->db), 0);
	assert_int_equal(count_audit(f->db), added + 1);
	int in_order = -1;
	assert_int_equal(db_one(f->db,
				"SELECT count(*) = 0 FROM audit a JOIN audit b ON b.id > a.id"
				" WHERE b.time < a.time",
				"", db_row_int, &in_order),
			 1);
	assert_int_equal(in_order, 1); /* ids follow the times: held ones kept their place */
	int txn = -1;
	db_one(f->db, "SELECT count(*) FROM audit WHERE action = 'test.txn'", "", db_row_int, &txn);
	assert_int_equal(txn, 0); /* the failed transaction left nothing */
	assert_whole(f->path);
}

/* A checkpoint that must grow the database file on a full disk: it fails (or
 * stops short), the WAL keeps every frame, and the file stays whole. */
static void test_checkpoint_on_full_disk_keeps_the_file_whole(void **state)
{
	struct fixture *f = *state;
	sqlite3 *raw;
	char sql[64];
	int rc, log_frames = -1, done_frames = -1;

	if (!f)
		skip();
	/* pages for the WAL only: fewer than the 1,000 of an automatic checkpoint */
	for (int i = 0; i < ENTRIES; i++)
		assert_int_equal(audit_add(f->db, 2000 + i, "t", "test.wal", "w", NULL, big_detail()),
				 0);
	assert_int_equal(count_audit(f->db), ENTRIES);
	fill(f->filler);

	assert_int_equal(sqlite3_open_v2(f->path, &raw, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	/* a first read opens the WAL on this connection */
	assert_int_equal(sqlite3_exec(raw, "SELECT count(*) FROM audit", NULL, NULL, NULL),
			 SQLITE_OK);
	rc = sqlite3_wal_checkpoint_v2(raw, NULL, SQLITE_CHECKPOINT_TRUNCATE, &log_frames,
				       &done_frames);
	print_message("checkpoint on the full disk: %s (%d of %d frames)\n", sqlite3_errstr(rc),
		      done_frames, log_frames);
	assert_true(rc != SQLITE_OK || done_frames < log_frames || log_frames <= 0);
	sqlite3_close(raw);
	assert_whole(f->path);
	assert_int_equal(count_audit(f->db), ENTRIES); /* nothing lost */

	assert_int_equal(unlink(f->filler), 0);
	assert_int_equal(sqlite3_open_v2(f->path, &raw, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	snprintf(sql, sizeof(sql), "PRAGMA wal_checkpoint(TRUNCATE)");
	assert_int_equal(sqlite3_exec(raw, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(raw);
	assert_whole(f->path);
	assert_int_equal(count_audit(f->db), ENTRIES);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_full_disk_fails_cleanly_and_resumes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_on_full_disk_keeps_the_file_whole,
						setup, teardown),
	};
	/* a private mount namespace: the tmpfs goes with this process */
	mounted = unshare(CLONE_NEWNS) == 0 &&
		  mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
	if (!mounted)
		fprintf(stderr, "test_store_full: no mount namespace (not root?): %s\n",
			strerror(errno));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
