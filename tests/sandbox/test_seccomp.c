/* test_seccomp.c - the seccomp filter in a forked child (needs no root: the child sets
 * no_new_privs): denied calls give EPERM, clone3 ENOSYS, TIOCSTI with high bits EPERM,
 * and what GPU notebooks need still works. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/secfilter.h"

#define CHECK(cond, code) do { if (!(cond)) _exit(code); } while (0)

static void test_filter(void **st)
{
	int status;
	pid_t pid;
	(void)st;

	pid = fork();
	if (pid == 0) {
		char ch = 'x';
		int fd;
		CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, 2);
		CHECK(secfilter_install() == 0, 3);
		CHECK(mount("none", "/", "tmpfs", 0, NULL) < 0 && errno == EPERM, 4);
		CHECK(unshare(CLONE_NEWUSER) < 0 && errno == EPERM, 5);
		CHECK(syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, NULL, NULL, NULL, NULL) < 0 && errno == EPERM, 6);
		CHECK(syscall(SYS_clone3, NULL, 0) < 0 && errno == ENOSYS, 7);
		CHECK(syscall(SYS_bpf, 0, NULL, 0) < 0 && errno == EPERM, 8);
		CHECK(syscall(SYS_keyctl, 0, 0, 0) < 0 && errno == EPERM, 9);
		fd = open("/dev/null", O_RDONLY);
		CHECK(syscall(SYS_ioctl, fd, (unsigned long)TIOCSTI | (1UL << 32), &ch) < 0 && errno == EPERM, 10);
		CHECK(ioctl(fd, TIOCSTI, &ch) < 0 && errno == EPERM, 11);
		CHECK(socket(AF_ALG, SOCK_SEQPACKET, 0) < 0 && errno == EPERM, 12);
		/* allowed: CUDA (memfd), NCCL (pidfd), plain fork */
		CHECK(memfd_create("x", 0) >= 0, 13);
		CHECK(syscall(SYS_pidfd_open, getpid(), 0) >= 0, 14);
		{
			pid_t c = fork();
			if (c == 0)
				_exit(0);
			CHECK(c > 0 && waitpid(c, NULL, 0) == c, 15);
		}
		/* ioctl on /dev/null without TIOCSTI is the kernel's answer, not ours */
		CHECK(ioctl(fd, TIOCGWINSZ, &ch) < 0 && errno == ENOTTY, 16);
		_exit(0);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_denied_list(void **st)
{
	const char *const *d = secfilter_denied();
	int seen_mount = 0, seen_ptrace = 0, n = 0;
	(void)st;
	for (; *d; d++, n++) {
		seen_mount |= strcmp(*d, "mount") == 0;
		seen_ptrace |= strcmp(*d, "ptrace") == 0;
	}
	assert_true(seen_mount);
	assert_false(seen_ptrace); /* profilers need it; the pid namespace bounds it */
	assert_true(n > 40);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_filter),
		cmocka_unit_test(test_denied_list),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
