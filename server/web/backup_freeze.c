/* backup_freeze.c - a consistent copy of a home in use; see backup_int.h.
 *
 * A running runtime writes its home through a loop device: the image file may be
 * half-way through an ext4 journal commit at any instant. FIFREEZE flushes the file
 * system and blocks new writes (the writers wait, they do not fail) until FITHAW,
 * so the image copied in between is one the kernel would mount clean.
 *
 * A frozen file system that nobody thaws hangs every writer of that home for good,
 * so the thaw must not depend on this process finishing: a watchdog, forked before
 * the freeze, in its own session and deaf to the terminal's signals, thaws at the
 * deadline or as soon as the pipe from this process closes without the "thawed"
 * byte (this process died, even by SIGKILL). This process thaws itself when the
 * copy is done; its FITHAW failing with EINVAL means the watchdog got there first
 * and the copy is not the frozen one. */
#include "web/backup_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "labd/clock.h"
#include "labd/log.h"

#define THAWED_BYTE 't'

/* The watchdog: waits for THAWED_BYTE until max_s, else thaws fsfd. */
static void watchdog(int fsfd, int rd, unsigned max_s)
{
	struct pollfd p = {.fd = rd, .events = POLLIN};
	char c = 0;

	setsid();
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	while (poll(&p, 1, (int)max_s * 1000) < 0 && errno == EINTR)
		;
	if (p.revents && read(rd, &c, 1) == 1 && c == THAWED_BYTE)
		_exit(0);
	if (ioctl(fsfd, FITHAW, 0) == 0)
		log_error("backup: thawed the home at %us (the copy is given up)", max_s);
	_exit(0);
}

/* Forks the watchdog; the write end of its pipe into *wr. Its pid, or -1. */
static pid_t watchdog_start(int fsfd, unsigned max_s, int *wr)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return log_errno("pipe");
	if ((pid = fork()) < 0) {
		log_errno("fork");
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[1]);
		watchdog(fsfd, p[0], max_s);
	}
	close(p[0]);
	*wr = p[1];
	return pid;
}

static void watchdog_end(pid_t pid, int wr, bool thawed)
{
	char c = THAWED_BYTE;

	if (thawed && write(wr, &c, 1) != 1)
		log_errno("backup: tell the watchdog");
	close(wr);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* The copy is synced after the thaw: the freeze need not wait for the disk. */
static int sync_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), rc = 0;

	if (fd < 0 || fsync(fd) < 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	return rc;
}

/* The copy itself, inside the freeze. */
static int copy_in_freeze(const char *image, const char *dst, int64_t deadline_ns)
{
	/* Failure injection for tests: LABD_FAULT_BACKUP_FROZEN_MS=<ms> holds the
	 * freeze that long before the copy, so a test can outlast --freeze-max or
	 * kill the backup while the home is frozen. */
	const char *fault = getenv("LABD_FAULT_BACKUP_FROZEN_MS");
	struct stat st;
	int in = open(image, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), out = -1, rc;

	if (fault)
		usleep((useconds_t)strtoul(fault, NULL, 10) * 1000);
	if (in < 0 || fstat(in, &st) < 0) {
		rc = -errno;
		goto out;
	}
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	rc = out < 0 ? -errno : backup_copy_sparse(in, out, st.st_size, deadline_ns);
out:
	if (out >= 0)
		close(out);
	if (in >= 0)
		close(in);
	return rc;
}

int backup_copy_frozen(const char *mnt, const char *image, const char *dst, unsigned max_s)
{
	int fsfd = open(mnt, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), wr = -1, rc;
	int64_t t0, frozen_ms;
	pid_t dog;

	if (fsfd < 0) {
		log_errno("open %s", mnt);
		return -EIO;
	}
	if ((dog = watchdog_start(fsfd, max_s, &wr)) < 0) {
		close(fsfd);
		return -EIO;
	}
	if (ioctl(fsfd, FIFREEZE, 0) < 0) {
		rc = -errno;
		log_errno("freeze %s", mnt);
		watchdog_end(dog, wr, true);
		close(fsfd);
		return rc;
	}
	t0 = clock_ns();
	log_info("backup: %s frozen for its copy (at most %us)", mnt, max_s);
	rc = copy_in_freeze(image, dst, t0 + (int64_t)max_s * 1000000000);
	frozen_ms = (clock_ns() - t0) / 1000000;
	if (ioctl(fsfd, FITHAW, 0) < 0) {
		/* EINVAL: not frozen any more, the watchdog thawed it */
		log_error("backup: %s was thawed before its copy ended (over %us): copy given up",
			  mnt, max_s);
		rc = rc < 0 ? rc : -ETIMEDOUT;
		watchdog_end(dog, wr, false);
	} else {
		watchdog_end(dog, wr, true);
	}
	close(fsfd);
	if (rc == 0)
		rc = sync_file(dst);
	if (rc < 0) {
		log_error("copy %s (frozen) to %s: %s", image, dst, strerror(-rc));
		unlink(dst);
		return rc;
	}
	log_info("backup: %s was frozen for %lld ms", mnt, (long long)frozen_ms);
	return 0;
}
