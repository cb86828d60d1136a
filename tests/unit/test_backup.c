/* Unit tests: the backup CLI's copies and checks (server/web/backup_copy.c,
 * backup_verify.c): a sparse copy keeps holes and content, its checksum is the
 * one sha256sum gives the whole file, a copy past its deadline stops, and a
 * manifest naming a path outside the layout, a wrong size or checksum fails. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "web/backup_int.h"

#define SPARSE_SIZE (64 << 20)

/* A 64 MiB file holding 4 KiB at 0, 8 KiB at 32 MiB and its last byte. */
static void make_sparse(const char *path)
{
	static char a[4096], b[8192];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	memset(a, 'a', sizeof(a));
	memset(b, 'b', sizeof(b));
	assert_int_equal(ftruncate(fd, SPARSE_SIZE), 0);
	assert_int_equal(pwrite(fd, a, sizeof(a), 0), sizeof(a));
	assert_int_equal(pwrite(fd, b, sizeof(b), 32 << 20), sizeof(b));
	assert_int_equal(pwrite(fd, "z", 1, SPARSE_SIZE - 1), 1);
	close(fd);
}

static void sha_of(const char *path, char hex[65], uint64_t *size)
{
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(backup_sha256_fd(fd, hex, size), 0);
	close(fd);
}

static void test_sparse_copy_keeps_holes_and_content(void **state)
{
	char dir[64], src[128], dst[128], cmd[300], hex[65], hex2[65], want[65] = "";
	uint64_t size, size2;
	struct stat st;
	FILE *p;
	(void)state;

	unit_tempdir(dir);
	snprintf(src, sizeof(src), "%s/src.img", dir);
	snprintf(dst, sizeof(dst), "%s/dst.img", dir);
	make_sparse(src);
	assert_int_equal(backup_copy_file(src, dst), 0);
	assert_int_equal(stat(dst, &st), 0);
	assert_int_equal(st.st_size, SPARSE_SIZE);
	assert_true(st.st_blocks * 512 < (1 << 20)); /* the holes stayed holes */
	assert_int_equal(st.st_mode & 0777, 0600);
	snprintf(cmd, sizeof(cmd), "cmp -s '%s' '%s'", src, dst);
	assert_int_equal(system(cmd), 0);
	sha_of(src, hex, &size);
	sha_of(dst, hex2, &size2);
	assert_int_equal(size, SPARSE_SIZE);
	assert_string_equal(hex, hex2);
	snprintf(cmd, sizeof(cmd), "sha256sum '%s'", src);
	assert_non_null(p = popen(cmd, "r"));
	assert_non_null(fgets(want, sizeof(want), p));
	pclose(p);
	assert_string_equal(hex, want);
	assert_true(backup_copy_file(src, dst) < 0); /* never over an existing file */
	unit_rmdir(dir);
}

static void test_copy_stops_at_its_deadline(void **state)
{
	char dir[64], src[128], dst[128];
	int in, out;
	(void)state;

	unit_tempdir(dir);
	snprintf(src, sizeof(src), "%s/src.img", dir);
	snprintf(dst, sizeof(dst), "%s/dst.img", dir);
	make_sparse(src);
	in = open(src, O_RDONLY);
	out = open(dst, O_WRONLY | O_CREAT, 0600);
	assert_int_equal(backup_copy_sparse(in, out, SPARSE_SIZE, 1), -ETIMEDOUT);
	close(in);
	close(out);
	unit_rmdir(dir);
}

/* A backup folder with homes/1.img and a manifest listing path with size and sum. */
static void make_backup(const char *dir, const char *path, long long size, const char *sum)
{
	char p[128], text[512];

	snprintf(p, sizeof(p), "%s/homes", dir);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/homes/1.img", dir);
	make_sparse(p);
	snprintf(text, sizeof(text),
		 "{\"format\": 1, \"schema_version\": 3, \"files\": "
		 "[{\"path\": \"%s\", \"size\": %lld, \"sha256\": \"%s\"}]}",
		 path, size, sum);
	unit_write(dir, "manifest.json", text, p);
}

static void test_verify(void **state)
{
	/* most name an existing file: only the layout's rule refuses them */
	static const char *const bad_paths[] = {"homes/../homes/1.img", "./homes/1.img",
						"homes//1.img", "homes/01.img/../1.img",
						"manifest.json", "homes/1.img.new-77",
						"homes/Bad.img"};
	char dir[64], p[128], hex[65];
	uint64_t size;
	json_t *m = NULL;
	(void)state;

	unit_tempdir(dir);
	make_backup(dir, "homes/1.img", SPARSE_SIZE, "0");
	snprintf(p, sizeof(p), "%s/homes/1.img", dir);
	sha_of(p, hex, &size);
	assert_int_equal(backup_verify(dir, &m), -1); /* wrong checksum */
	unit_rmdir(dir);

	unit_tempdir(dir);
	make_backup(dir, "homes/1.img", SPARSE_SIZE - 1, hex);
	assert_int_equal(backup_verify(dir, &m), -1); /* wrong size */
	unit_rmdir(dir);

	for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++) {
		unit_tempdir(dir);
		make_backup(dir, bad_paths[i], SPARSE_SIZE, hex);
		assert_int_equal(backup_verify(dir, &m), -1);
		unit_rmdir(dir);
	}

	unit_tempdir(dir); /* a link in the layout's name is not followed */
	make_backup(dir, "homes/2.img", SPARSE_SIZE, hex);
	snprintf(p, sizeof(p), "%s/homes/2.img", dir);
	assert_int_equal(symlink("1.img", p), 0);
	assert_int_equal(backup_verify(dir, &m), -1);
	unit_rmdir(dir);

	unit_tempdir(dir);
	make_backup(dir, "homes/1.img", SPARSE_SIZE, hex);
	assert_int_equal(backup_verify(dir, &m), 0);
	assert_non_null(m);
	json_decref(m);
	unit_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sparse_copy_keeps_holes_and_content),
		cmocka_unit_test(test_copy_stops_at_its_deadline),
		cmocka_unit_test(test_verify),
	};
	return cmocka_run_group_tests_name("backup", tests, NULL, NULL);
}
