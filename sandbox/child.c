/* child.c - the sandbox child: pid 1 of the new namespaces.
 *
 * Order (nsjail's containProc, bubblewrap): wait for the parent to write the uid/gid
 * maps and move us into the cgroup -> cgroup namespace -> clone the host trees ->
 * become the inner uid -> build the filesystem and pivot -> hostname, loopback ->
 * drop every capability, no_new_privs, not dumpable -> seccomp -> rlimits -> fork the
 * command; this process stays as a tiny init that forwards signals and reaps.
 */
#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <grp.h>

#include "labd/log.h"
#include "sandbox/secfilter.h"

extern char **environ;

/* Reports a setup failure to the parent through err_fd and exits. */
static _Noreturn void child_fail(const struct child_args *a, const char *msg)
{
	size_t n = strlen(msg);
	if (write(a->err_fd, msg, n) < 0)
		_exit(127);
	_exit(127);
}

static _Noreturn void child_failf(const struct child_args *a, const char *what)
{
	char msg[512];
	snprintf(msg, sizeof(msg), "%s: %s", what, strerror(errno));
	child_fail(a, msg);
}

static int loopback_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc = -1;

	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		rc = ioctl(fd, SIOCSIFFLAGS, &ifr);
	}
	close(fd);
	return rc;
}

static int drop_caps(void)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];

	for (int c = 0; c <= 63; c++) {
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
			return -1;
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return -1;
	memset(data, 0, sizeof(data));
	return (int)syscall(SYS_capset, &hdr, data);
}

/* Moves our three pipes to 3, 4, 5 and closes every other inherited fd. */
static void close_fds(struct child_args *a)
{
	int fds[3] = {a->sync_fd, a->err_fd, a->status_fd};
	for (int i = 0; i < 3; i++) {
		int tmp = fcntl(fds[i], F_DUPFD_CLOEXEC, 16);
		if (tmp < 0)
			_exit(127);
		fds[i] = tmp;
	}
	for (int i = 0; i < 3; i++) {
		if (dup3(fds[i], 3 + i, O_CLOEXEC) < 0)
			_exit(127);
	}
	/* nothing of the parent's survives: no leaked fd reaches a host directory or
	 * socket (CVE-2024-21626 class) */
	if (syscall(SYS_close_range, 6, ~0U, 0) < 0) {
		for (int fd = 6; fd < 65536; fd++)
			close(fd);
	}
	a->sync_fd = 3;
	a->err_fd = 4;
	a->status_fd = 5;
}

static _Noreturn void run_command(const struct child_args *a, const sigset_t *oldmask)
{
	struct sigaction sa;
	sigset_t none;

	(void)oldmask;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++)
		sigaction(s, &sa, NULL);
	/* A fresh mask, not the caller's: the labd supervisor blocks SIGTERM and
	 * SIGCHLD for its signalfd, and a command started with SIGTERM blocked
	 * could never be asked to stop. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	close(a->status_fd);
	/* own session: TIOCSTI on an inherited terminal can't reach the caller's shell */
	setsid();
	if (a->cwd && chdir(a->cwd) < 0 && chdir("/") < 0)
		child_failf(a, "chdir");
	environ = (char **)a->envp;
	execvp(a->argv[0], a->argv);
	{
		char msg[512];
		snprintf(msg, sizeof(msg), "exec %s: %s", a->argv[0], strerror(errno));
		child_fail(a, msg);
	}
}

/* pid 1: forwards termination signals to the command, reaps every orphan, and exits
 * with the command's status once it is gone (the kernel then kills the rest of the
 * pid namespace). */
static _Noreturn void run_init(const struct child_args *a, pid_t cmd, const sigset_t *set)
{
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(set, &si);
		if (sig < 0)
			continue;
		if (sig != SIGCHLD) {
			kill(cmd, sig);
			continue;
		}
		for (;;) {
			int st;
			pid_t p = waitpid(-1, &st, WNOHANG);
			if (p <= 0)
				break;
			if (p == cmd) {
				if (write(a->status_fd, &st, sizeof(st)) < 0) {
					/* parent gone: the exit code below still says it */
				}
				if (WIFEXITED(st))
					_exit(WEXITSTATUS(st));
				_exit(128 + WTERMSIG(st));
			}
		}
	}
}

static void never_called(int sig)
{
	(void)sig;
}

static void install_forward_handlers(const sigset_t *set)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = never_called;
	sigemptyset(&sa.sa_mask);
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGCHLD && sigismember(set, sig) == 1)
			sigaction(sig, &sa, NULL);
}

_Noreturn void child_main(const struct child_args *args)
{
	struct child_args a = *args;
	struct mount_fds fds;
	struct rlimit rl;
	sigset_t set, old;
	char msg[768], c;
	pid_t cmd;

	/* getppid() is 0 in the new pid namespace; a parent that died before this line
	 * is noticed as EOF on sync_fd below */
	if (a.die_with_parent)
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* Its own session: a Ctrl-C meant for the caller's terminal (labd run in
	 * the foreground) must not reach init, which would forward it to Jupyter. */
	setsid();
	close_fds(&a);
	if (read(a.sync_fd, &c, 1) != 1)
		_exit(127); /* the parent failed before releasing us */
	close(a.sync_fd);

	/* the cgroup namespace roots /proc/self/cgroup at the cgroup the parent made */
	if (unshare(CLONE_NEWCGROUP) < 0)
		child_failf(&a, "unshare cgroup namespace");
	if (mounts_prepare(&a, &fds, msg, sizeof(msg)) < 0)
		child_fail(&a, msg);
	/* drop the host root's supplementary groups before anything else can use them */
	if (setgroups(0, NULL) < 0 || setresgid(a.inner_uid, a.inner_uid, a.inner_uid) < 0 ||
	    setresuid(a.inner_uid, a.inner_uid, a.inner_uid) < 0)
		child_failf(&a, "switch to the inner uid");
	/* a credential change clears the parent-death signal: set it (again) now, then
	 * make sure the parent did not die before it took effect (our status pipe's read
	 * end is gone then, which poll reports as POLLERR) */
	if (a.die_with_parent) {
		struct pollfd p = {a.status_fd, POLLOUT, 0};
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		if (poll(&p, 1, 0) == 1 && (p.revents & POLLERR))
			_exit(127);
	}
	if (mounts_build(&a, &fds, msg, sizeof(msg)) < 0)
		child_fail(&a, msg);
	if (sethostname(a.user, strlen(a.user)) < 0)
		child_failf(&a, "sethostname");
	if (loopback_up() < 0)
		child_failf(&a, "bring up lo");

	if (drop_caps() < 0)
		child_failf(&a, "drop capabilities");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_failf(&a, "no_new_privs");
	/* init holds the supervisor's memory image: nobody inside may ptrace or read it,
	 * nor write through /proc/1/exe (CVE-2019-5736 class) */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		child_failf(&a, "set non-dumpable");
	if (secfilter_install() < 0)
		child_failf(&a, "seccomp");
	rl.rlim_cur = rl.rlim_max = 0;
	if (setrlimit(RLIMIT_CORE, &rl) < 0)
		child_failf(&a, "rlimit core");
	rl.rlim_cur = rl.rlim_max = a.nofile;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		child_failf(&a, "rlimit nofile");

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	sigprocmask(SIG_BLOCK, &set, &old);
	/* As pid 1 of its namespace, init is SIGNAL_UNKILLABLE: the kernel drops a
	 * signal sent from outside whose handler is SIG_DFL, even while it is
	 * blocked for sigwaitinfo. A handler (never run: the signals stay blocked)
	 * makes the supervisor's SIGTERM arrive so it can be forwarded. */
	install_forward_handlers(&set);
	cmd = fork();
	if (cmd < 0)
		child_failf(&a, "fork command");
	if (cmd == 0)
		run_command(&a, &old);
	close(a.err_fd); /* EOF reaches the parent once the command has exec'd */
	run_init(&a, cmd, &set);
}
