/* backup_copy.c - sparse copies and checksums of big files; see backup_int.h.
 *
 * A home image is a sparse file of its full size (15 GiB by default) holding a few
 * hundred MiB: a plain copy would write every hole out as zeros. The data ranges
 * are found with SEEK_DATA/SEEK_HOLE and copied with copy_file_range (in the
 * kernel, a reflink where the file system can), so a copy costs what is written. */
#include "web/backup_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "labd/clock.h"
#include "labd/log.h"

#define CHUNK_BYTES (1 << 20)

static unsigned char zeros[CHUNK_BYTES];

/* What copy_file_range cannot do (another file system type, an old kernel):
 * read and write. 0 or a negative errno. */
static int copy_plain(int in, int out, off_t off, off_t len)
{
	static unsigned char buf[CHUNK_BYTES];

	while (len > 0) {
		ssize_t n = pread(in, buf, len < CHUNK_BYTES ? (size_t)len : CHUNK_BYTES, off);
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		for (ssize_t done = 0; done < n;) {
			ssize_t w = pwrite(out, buf + done, (size_t)(n - done), off + done);
			if (w < 0)
				return -errno;
			done += w;
		}
		off += n;
		len -= n;
	}
	return 0;
}

static int copy_range(int in, int out, off_t off, off_t len, int64_t deadline_ns)
{
	static bool plain; /* copy_file_range refused once: it will again */

	while (len > 0) {
		off_t from = off, to = off;
		ssize_t n = plain ? -1
				  : copy_file_range(in, &from, out, &to,
						    len < 64 * CHUNK_BYTES ? (size_t)len : 64 * CHUNK_BYTES, 0);
		if (n < 0 && !plain && errno != EXDEV && errno != EINVAL && errno != ENOSYS &&
		    errno != EOPNOTSUPP)
			return -errno;
		if (n < 0) {
			plain = true;
			return copy_plain(in, out, off, len);
		}
		if (n == 0)
			return -EIO; /* the file shrank under us */
		off += n;
		len -= n;
		if (deadline_ns && clock_ns() > deadline_ns)
			return -ETIMEDOUT;
	}
	return 0;
}

int backup_copy_sparse(int in, int out, off_t size, int64_t deadline_ns)
{
	off_t off = 0;
	int rc;

	if (ftruncate(out, size) < 0)
		return -errno;
	while (off < size) {
		off_t data = lseek(in, off, SEEK_DATA), hole;
		if (data < 0)
			return errno == ENXIO ? 0 : -errno; /* only a hole is left */
		if (data >= size)
			break;
		hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0)
			return -errno;
		if (hole > size)
			hole = size;
		if ((rc = copy_range(in, out, data, hole - data, deadline_ns)) < 0)
			return rc;
		off = hole;
	}
	return 0;
}

static int hash_range(EVP_MD_CTX *ctx, int fd, off_t off, off_t len, bool hole)
{
	static unsigned char buf[CHUNK_BYTES];

	while (len > 0) {
		size_t want = len < CHUNK_BYTES ? (size_t)len : CHUNK_BYTES;
		ssize_t n = hole ? (ssize_t)want : pread(fd, buf, want, off);
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		if (!EVP_DigestUpdate(ctx, hole ? zeros : buf, (size_t)n))
			return -EIO;
		off += n;
		len -= n;
	}
	return 0;
}

static int hash_all(EVP_MD_CTX *ctx, int fd, off_t size)
{
	off_t off = 0;
	int rc;

	while (off < size) {
		off_t data = lseek(fd, off, SEEK_DATA), hole;
		if (data < 0 && errno != ENXIO)
			return -errno;
		if (data < 0 || data > size)
			data = size;
		if ((rc = hash_range(ctx, fd, off, data - off, true)) < 0)
			return rc;
		if (data == size)
			break;
		if ((hole = lseek(fd, data, SEEK_HOLE)) < 0)
			return -errno;
		if (hole > size)
			hole = size;
		if ((rc = hash_range(ctx, fd, data, hole - data, false)) < 0)
			return rc;
		off = hole;
	}
	return 0;
}

int backup_sha256_fd(int fd, char hex[65], uint64_t *size)
{
	unsigned char md[32];
	unsigned int len = 0;
	struct stat st;
	EVP_MD_CTX *ctx;
	int rc;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!(ctx = EVP_MD_CTX_new()))
		return -ENOMEM;
	rc = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) ? hash_all(ctx, fd, st.st_size) : -EIO;
	if (rc == 0 && !EVP_DigestFinal_ex(ctx, md, &len))
		rc = -EIO;
	EVP_MD_CTX_free(ctx);
	if (rc < 0)
		return rc;
	for (unsigned i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	*size = (uint64_t)st.st_size;
	return 0;
}

int backup_copy_file(const char *src, const char *dst)
{
	struct stat st;
	int in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), out = -1, rc;

	if (in < 0) {
		rc = -errno;
		log_errno("open %s", src);
		return rc;
	}
	if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		log_error("%s: not a regular file", src);
		goto out;
	}
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0) {
		rc = -errno;
		log_errno("create %s", dst);
		goto out;
	}
	rc = backup_copy_sparse(in, out, st.st_size, 0);
	if (rc == 0 && fsync(out) < 0)
		rc = -errno;
	if (rc < 0) {
		log_error("copy %s to %s: %s", src, dst, strerror(-rc));
		unlink(dst);
	}
out:
	if (out >= 0)
		close(out);
	close(in);
	return rc;
}

int backup_new_dir(const char *dir, mode_t mode)
{
	struct dirent *e;
	bool found = false;
	DIR *d;

	if (mkdir(dir, mode) == 0)
		return 1;
	if (errno != EEXIST)
		return log_errno("mkdir %s", dir);
	if (!(d = opendir(dir)))
		return log_errno("open %s", dir);
	while (!found && (e = readdir(d)))
		found = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return found ? -ENOTEMPTY : 0;
}
