/* fork.c - linked into the ThreadSanitizer build only (make check-tsan; README.md
 * beside it). TSan's fork starts its background thread in the child of a
 * single-threaded parent, so every child of the supervisor would be multi-threaded,
 * and there setns(CLONE_NEWNS) and unshare(CLONE_NEWUSER|CLONE_NEWNS) fail with
 * EINVAL: no sandbox, job staging or home mount would work. A single-threaded caller
 * (the supervisor, its workers and keepers, a single-threaded test) forks with _Fork,
 * which TSan does not hook: the child is a plain copy of a process that held none of
 * TSan's locks, and stays single-threaded. Any other caller gets TSan's fork. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

pid_t fork(void);
pid_t __interceptor_fork(void);

/* From /proc/self/stat, field 20; false when it cannot be read. */
static bool single_threaded(void)
{
	char buf[1024];
	const char *p;
	ssize_t n;
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* after the command's closing parenthesis: state is field 3, threads field 20 */
	if (!(p = strrchr(buf, ')')))
		return false;
	for (int field = 2; field < 20 && p; field++)
		p = strchr(p + 1, ' ');
	return p && strtol(p + 1, NULL, 10) == 1;
}

pid_t fork(void)
{
	return single_threaded() ? _Fork() : __interceptor_fork();
}
