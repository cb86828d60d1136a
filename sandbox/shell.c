/* shell.c - a terminal in a running sandbox; see labd/sandbox_shell.h.
 *
 * Two processes.  The caller (root, a forked worker) takes the sandbox's cgroups and
 * then, through a pidfd of its init checked against its start time, every namespace
 * at once (setns with a pidfd, Linux 5.8: the kernel joins the user namespace first,
 * so the caller holds capabilities only there).  A pid namespace applies to children
 * only, so the shell is forked after; it drops to the inner uid with no group and no
 * capability (host root is not mapped in the sandbox's user namespace, so the kernel
 * would not clear them by itself), sets no_new_privs and the sandbox's seccomp filter
 * and only then opens its pty, in the sandbox's own devpts instance: everything from
 * there on is done as the user.  It sends the master back and execs the shell.  A
 * credential change leaves it non-dumpable until that exec, so nothing in the
 * sandbox can ptrace it while it still holds the socket to the caller.
 */
#include "labd/sandbox_shell.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

#include "labd/log.h"
#include "sandbox/cgbox.h"
#include "sandbox/secfilter.h"
#include "sandbox/state.h"

#define SHELL_NS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | \
		  CLONE_NEWUTS | CLONE_NEWCGROUP)
/* the shell's setup is a few syscalls; a sandbox thrashing at its memory limit may
 * slow it, never hold its caller for longer than this */
#define SHELL_SETUP_MS 5000
#define PTMX_MAJOR 5
#define PTMX_MINOR 2

extern char **environ;

static int errf(struct sandbox_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int errf(struct sandbox_error *err, const char *fmt, ...)
{
	struct sandbox_error none;
	va_list ap;

	err = err ? err : &none;
	snprintf(err->step, sizeof(err->step), "shell");
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	log_error("%s", err->message);
	return -1;
}

/* ---- the shell's side (after the fork, in the sandbox's pid namespace) ---- */

/* Tells the caller what failed (no fd: it reads that as the failure) and exits. */
static _Noreturn void shell_fail(int sock, const char *what)
{
	char msg[256];
	int n = snprintf(msg, sizeof(msg), "%s: %s", what, strerror(errno));

	if (send(sock, msg, (size_t)(n < (int)sizeof(msg) ? n : (int)sizeof(msg) - 1),
		 MSG_NOSIGNAL) < 0)
		_exit(2);
	_exit(1);
}

static void default_signals(void)
{
	struct sigaction sa;
	sigset_t none;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++)
		sigaction(s, &sa, NULL);
	/* the supervisor blocks SIGTERM and SIGCHLD for its signalfd */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* The inner uid and gid, no supplementary group, an empty bounding set, no
 * capability left in any set. */
static int drop_to_user(uint32_t u)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];

	for (int c = 0; c <= 63; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
			return -1;
	if (setgroups(0, NULL) < 0 || setresgid(u, u, u) < 0 || setresuid(u, u, u) < 0)
		return -1;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return -1;
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -1;
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

static int set_rlimits(uint64_t nofile)
{
	struct rlimit rl = {0, 0};

	if (setrlimit(RLIMIT_CORE, &rl) < 0)
		return -1;
	rl.rlim_cur = rl.rlim_max = nofile ? nofile : 4096;
	return setrlimit(RLIMIT_NOFILE, &rl);
}

/* The master and the peer of a new pty of the sandbox's devpts (the peer opened from
 * the master, never by a path the user could change). */
static int open_pty(const struct sandbox_shell *s, int *slave)
{
	struct winsize ws = {.ws_row = s->rows ? s->rows : 24, .ws_col = s->cols ? s->cols : 80};
	int unlock = 0, m = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);

	if (m < 0)
		return -1;
	if (ioctl(m, TIOCSPTLCK, &unlock) < 0 || ioctl(m, TIOCSWINSZ, &ws) < 0 ||
	    (*slave = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY)) < 0) {
		int e = errno;
		close(m);
		errno = e;
		return -1;
	}
	return m;
}

static int send_fd(int sock, int fd)
{
	char byte = 'm', ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&byte, 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			    .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c;

	memset(ctl, 0, sizeof(ctl));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &mh, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

static _Noreturn void run_shell(const struct sandbox_shell *s, int sock)
{
	int master, slave = -1;

	default_signals();
	if (setsid() < 0)
		shell_fail(sock, "setsid");
	if (drop_to_user(s->inner_uid) < 0)
		shell_fail(sock, "switch to the sandbox's user");
	if (secfilter_install() < 0)
		shell_fail(sock, "install the seccomp filter");
	if (set_rlimits(s->nofile) < 0)
		shell_fail(sock, "rlimits");
	if ((master = open_pty(s, &slave)) < 0)
		shell_fail(sock, "open a pty in the sandbox");
	if (send_fd(sock, master) < 0)
		_exit(2); /* the caller is gone: nobody holds the terminal */
	close(master);
	close(sock);
	if (ioctl(slave, TIOCSCTTY, 0) < 0)
		_exit(3);
	if (dup2(slave, 0) < 0 || dup2(slave, 1) < 0 || dup2(slave, 2) < 0)
		_exit(3);
	if (syscall(SYS_close_range, 3, ~0U, 0) < 0)
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
	if (!s->cwd || chdir(s->cwd) < 0)
		if (chdir("/") < 0)
			_exit(3);
	environ = (char **)s->envp;
	execvp(s->argv[0], s->argv);
	if (s->argv2)
		execvp(s->argv2[0], s->argv2);
	dprintf(2, "labd: cannot run a shell: %s\r\n", strerror(errno));
	_exit(127);
}

/* ---- the caller's side ---- */

/* A pidfd of h's init, checked to be that very process (pid and start time). */
static int open_init(const struct sandbox_handle *h)
{
	int fd;

	if (h->pid <= 0 || sandbox_proc_start_ticks(h->pid) != h->start_time_ticks) {
		errno = ESRCH;
		return -1;
	}
	fd = (int)syscall(SYS_pidfd_open, h->pid, 0);
	if (fd >= 0 && sandbox_proc_start_ticks(h->pid) != h->start_time_ticks) {
		close(fd);
		errno = ESRCH;
		return -1;
	}
	return fd;
}

static int join_cgroups(const struct sandbox_handle *h)
{
	const struct cgbox_layout *lo = cgbox_host();
	struct sandbox_state st;

	if (!lo || !h->state_path[0] || sandbox_state_load(h->state_path, &st) < 0) {
		errno = ENOENT;
		return -1;
	}
	return cgbox_attach(lo, st.cgroup_parent, st.id, getpid());
}

/* The master the shell sends, or its failure in err; -1 on failure. */
static int recv_master(int sock, const char *id, struct sandbox_error *err)
{
	char buf[256], ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {buf, sizeof(buf) - 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			    .msg_controllen = sizeof(ctl)};
	struct pollfd p = {sock, POLLIN, 0};
	struct cmsghdr *c;
	struct stat sb;
	ssize_t n;
	int fd = -1;

	if (poll(&p, 1, SHELL_SETUP_MS) != 1)
		return errf(err, "sandbox %s: shell: no terminal within %d ms", id, SHELL_SETUP_MS);
	n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	for (c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
	if (fd < 0) {
		buf[n > 0 ? n : 0] = '\0';
		return errf(err, "sandbox %s: shell: %s", id, n > 0 ? buf : "it ended before its terminal");
	}
	/* the shell ran as the user for a moment: take nothing but a pty's master */
	if (fstat(fd, &sb) < 0 || !S_ISCHR(sb.st_mode) || major(sb.st_rdev) != PTMX_MAJOR ||
	    minor(sb.st_rdev) != PTMX_MINOR) {
		close(fd);
		return errf(err, "sandbox %s: shell: what came back is no pty", id);
	}
	return fd;
}

int sandbox_shell_start(const struct sandbox_handle *h, const struct sandbox_shell *s,
			int *master_fd, int *pidfd, struct sandbox_error *err)
{
	int init, sv[2], fd, pfd;
	pid_t pid;

	*master_fd = *pidfd = -1;
	if ((init = open_init(h)) < 0)
		return errf(err, "sandbox %s: shell: its init is gone", h->id);
	if (join_cgroups(h) < 0) {
		close(init);
		return errf(err, "sandbox %s: shell: join its cgroups: %s", h->id, strerror(errno));
	}
	if (setns(init, SHELL_NS) < 0) {
		int e = errno;
		close(init);
		return errf(err, "sandbox %s: shell: enter its namespaces: %s", h->id, strerror(e));
	}
	close(init);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return errf(err, "sandbox %s: shell: socketpair: %s", h->id, strerror(errno));
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		run_shell(s, sv[1]);
	}
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return errf(err, "sandbox %s: shell: fork: %s", h->id, strerror(errno));
	}
	/* our child, not reaped (we never wait): the pid is the shell's until we exit */
	pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	fd = pfd < 0 ? errf(err, "sandbox %s: shell: pidfd: %s", h->id, strerror(errno))
		     : recv_master(sv[0], h->id, err);
	close(sv[0]);
	if (fd < 0) {
		kill(pid, SIGKILL); /* set up half: the sandbox's init reaps it */
		if (pfd >= 0)
			close(pfd);
		return -1;
	}
	*master_fd = fd;
	*pidfd = pfd;
	return 0;
}
