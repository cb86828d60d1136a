/* child.c - the sandbox child: pid 1 of the new namespaces, built in named steps.
 *
 * The steps, in order (nsjail's containProc, bubblewrap), each a short function calling
 * into the module that owns it; the first that fails sends "<step>\0<what>" to the parent
 * through err_fd and exits 127:
 *
 *   session -> stdio -> wait-parent -> cgroup-namespace -> mount-sources -> inner-uid ->
 *   mounts (mounts.c) -> hostname -> loopback -> privileges -> rlimits -> wait-go ->
 *   seccomp (secfilter.c) -> command -> title (title.c); the command's own last step is
 *   exec.
 *
 * We are born in the sandbox's cgroups; the parent writes the uid/gid maps before
 * wait-parent returns, and the cgroup limits, the network and the state file before
 * wait-go does.  After "command" this process stays as a tiny init that forwards signals and
 * reaps (run_init).
 */
#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
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

#include "sandbox/secfilter.h"
#include "sandbox/title.h"

extern char **environ;

/* One child in the making: its copy of the arguments and what the steps share. */
struct child {
	struct child_args a;
	struct mount_fds fds;
	sigset_t set; /* the signals init waits for */
	pid_t cmd;
	char msg[512]; /* what the failing step says */
};

/* Sends "<step>\0<msg>" to the parent (one write: a pipe keeps it whole) and exits. */
static _Noreturn void report(int err_fd, const char *step, const char *msg)
{
	char buf[SANDBOX_STEP_MAX + 512];
	size_t sl = strnlen(step, SANDBOX_STEP_MAX - 1), ml = strnlen(msg, 511);

	memcpy(buf, step, sl);
	buf[sl] = '\0';
	memcpy(buf + sl + 1, msg, ml);
	if (write(err_fd, buf, sl + 1 + ml) < 0)
		_exit(127); /* the parent is gone: nobody to tell */
	_exit(127);
}

void child_report_parse(const char *buf, size_t len, char *step, size_t step_size, char *msg,
			size_t msg_size)
{
	const char *nul = memchr(buf, '\0', len);

	if (!nul) {
		snprintf(step, step_size, "child");
		snprintf(msg, msg_size, "%.*s", (int)len, buf);
		return;
	}
	snprintf(step, step_size, "%.*s", (int)(nul - buf), buf);
	snprintf(msg, msg_size, "%.*s", (int)(len - (size_t)(nul + 1 - buf)), nul + 1);
}

/* "<what>: <strerror(errno)>" into c->msg; returns -1. */
static int failed(struct child *c, const char *what)
{
	snprintf(c->msg, sizeof(c->msg), "%s: %s", what, strerror(errno));
	return -1;
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

/* getppid() is 0 in the new pid namespace; a parent that died before this is noticed as
 * EOF in wait-parent.  Its own session: a Ctrl-C meant for the caller's terminal (labd
 * run in the foreground) must not reach init, which would forward it to Jupyter. */
static int step_session(struct child *c)
{
	if (c->a.die_with_parent && prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		return failed(c, "set the parent-death signal");
	if (setsid() < 0)
		return failed(c, "setsid");
	return 0;
}

/* The spec's stdio onto 0, 1, 2 (nsjail's setupFD), our pipes and memfd onto 3-6
 * (close-on-exec), and nothing else of the caller's survives: no leaked fd reaches a
 * host directory or socket (CVE-2024-21626 class). */
static int step_stdio(struct child *c)
{
	enum { N = 8 };
	int want[N] = {c->a.stdio[0], c->a.stdio[1], c->a.stdio[2], c->a.sync_fd,
		       c->a.err_fd,   c->a.status_fd, c->a.filter_fd, c->a.root_fd};
	int moved[N];

	for (int i = 0; i < 3; i++)
		if (want[i] == SANDBOX_FD_NULL && (want[i] = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
			return failed(c, "open /dev/null");
	/* first all above the targets, so that none clobbers a source still to be moved */
	for (int i = 0; i < N; i++)
		if ((moved[i] = fcntl(want[i], F_DUPFD_CLOEXEC, N)) < 0)
			return failed(c, "duplicate stdio");
	c->a.err_fd = moved[4];
	for (int i = 0; i < N; i++)
		if (dup3(moved[i], i, i < 3 ? 0 : O_CLOEXEC) < 0)
			return failed(c, "move stdio");
	c->a.sync_fd = 3;
	c->a.err_fd = 4;
	c->a.status_fd = 5;
	c->a.filter_fd = 6;
	c->a.root_fd = 7;
	if (syscall(SYS_close_range, N, ~0U, 0) < 0) {
		for (int fd = N; fd < 65536; fd++)
			close(fd);
	}
	return 0;
}

/* The parent says go twice: once the uid maps are written (we are in our cgroups from
 * birth), then once the limits, the network and the state file are in place (wait-go);
 * everything between is labd's own code building the sandbox. */
static int step_wait_parent(struct child *c)
{
	char go;

	if (read(c->a.sync_fd, &go, 1) != 1)
		_exit(127); /* the parent failed before releasing us: nobody reads a report */
	return 0;
}

static int step_wait_go(struct child *c)
{
	char go;

	if (read(c->a.sync_fd, &go, 1) != 1)
		_exit(127); /* the parent failed after releasing us: it kills us anyway */
	close(c->a.sync_fd);
	return 0;
}

/* the cgroup namespace roots /proc/self/cgroup at the cgroup the parent made */
static int step_cgroup_ns(struct child *c)
{
	return unshare(CLONE_NEWCGROUP) < 0 ? failed(c, "unshare cgroup namespace") : 0;
}

static int step_mount_sources(struct child *c)
{
	return mounts_prepare(&c->a, &c->fds, c->msg, sizeof(c->msg));
}

/* Drops the host root's supplementary groups before anything else can use them. */
static int step_inner_uid(struct child *c)
{
	uid_t u = c->a.inner_uid;

	if (setgroups(0, NULL) < 0 || setresgid(u, u, u) < 0 || setresuid(u, u, u) < 0)
		return failed(c, "switch to the inner uid");
	/* a credential change clears the parent-death signal: set it again, then make sure
	 * the parent did not die before it took effect (our status pipe's read end is gone
	 * then, which poll reports as POLLERR) */
	if (c->a.die_with_parent) {
		struct pollfd p = {c->a.status_fd, POLLOUT, 0};
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
			return failed(c, "set the parent-death signal");
		if (poll(&p, 1, 0) == 1 && (p.revents & POLLERR))
			_exit(127);
	}
	return 0;
}

static int step_mounts(struct child *c)
{
	return mounts_build(&c->a, &c->fds, c->msg, sizeof(c->msg));
}

static int step_hostname(struct child *c)
{
	return sethostname(c->a.user, strlen(c->a.user)) < 0 ? failed(c, "sethostname") : 0;
}

static int step_loopback(struct child *c)
{
	return loopback_up() < 0 ? failed(c, "bring up lo") : 0;
}

static int step_privileges(struct child *c)
{
	if (drop_caps() < 0)
		return failed(c, "drop capabilities");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return failed(c, "no_new_privs");
	/* init holds the supervisor's memory image: nobody inside may ptrace or read it,
	 * nor write through /proc/1/exe (CVE-2019-5736 class) */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return failed(c, "set non-dumpable");
	return 0;
}

/* The program comes from the parent, which built it into a memfd while we built the
 * file system (start.c, step filter): complete once wait-go has returned. */
static int step_seccomp(struct child *c)
{
	static char prog[BPF_MAXINSNS * sizeof(struct sock_filter) + 1];
	size_t len = 0;
	ssize_t n;

	do {
		n = pread(c->a.filter_fd, prog + len, sizeof(prog) - len, (off_t)len);
		len += n > 0 ? (size_t)n : 0;
	} while (len < sizeof(prog) && (n > 0 || (n < 0 && errno == EINTR)));
	close(c->a.filter_fd);
	if (n < 0)
		return failed(c, "read the filter");
	return secfilter_load(prog, len) < 0 ? failed(c, "install the filter") : 0;
}

static int step_rlimits(struct child *c)
{
	struct rlimit rl = {0, 0};

	if (setrlimit(RLIMIT_CORE, &rl) < 0)
		return failed(c, "rlimit core");
	rl.rlim_cur = rl.rlim_max = c->a.nofile;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		return failed(c, "rlimit nofile");
	return 0;
}

/* After the fork: the command keeps its copy of the strings the title overwrites (its
 * argv may point into the caller's argument area, and so may user, cwd, image and the
 * masks, none of which init reads again). */
static int step_title(struct child *c)
{
	return title_set(c->a.user, c->msg, sizeof(c->msg));
}

/* The command's side, after fork: default signals, its own session, exec. */
static _Noreturn void run_command(const struct child_args *a)
{
	struct sigaction sa;
	sigset_t none;
	char msg[512];

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++)
		sigaction(s, &sa, NULL);
	/* A fresh mask, not the caller's: the labd supervisor blocks SIGTERM and SIGCHLD
	 * for its signalfd, and a command started with SIGTERM blocked could never be
	 * asked to stop. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	close(a->status_fd);
	/* own session: TIOCSTI on an inherited terminal can't reach the caller's shell */
	setsid();
	if (a->cwd && chdir(a->cwd) < 0 && chdir("/") < 0) {
		snprintf(msg, sizeof(msg), "chdir %s: %s", a->cwd, strerror(errno));
		report(a->err_fd, "exec", msg);
	}
	environ = (char **)a->envp;
	if (a->times)
		a->times->exec_ns = timing_now_ns();
	execvp(a->argv[0], a->argv);
	snprintf(msg, sizeof(msg), "exec %s: %s", a->argv[0], strerror(errno));
	report(a->err_fd, "exec", msg);
}

/* Blocks what init waits for and forks the command. */
static int step_command(struct child *c)
{
	static const int sigs[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

	sigemptyset(&c->set);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&c->set, sigs[i]);
	sigprocmask(SIG_BLOCK, &c->set, NULL);
	/* As pid 1 of its namespace, init is SIGNAL_UNKILLABLE: the kernel drops a signal
	 * sent from outside whose handler is SIG_DFL, even while it is blocked for
	 * sigwaitinfo.  A handler (never run: the signals stay blocked) makes the
	 * supervisor's SIGTERM arrive so it can be forwarded. */
	install_forward_handlers(&c->set);
	c->cmd = fork();
	if (c->cmd < 0)
		return failed(c, "fork the command");
	if (c->cmd == 0)
		run_command(&c->a);
	return 0;
}

static const struct child_step {
	const char *name;
	int (*run)(struct child *c);
} child_steps[] = {
	{"session", step_session},
	{"stdio", step_stdio},
	{"wait-parent", step_wait_parent},
	{"cgroup-namespace", step_cgroup_ns},
	{"mount-sources", step_mount_sources},
	{"inner-uid", step_inner_uid},
	{"mounts", step_mounts},
	{"hostname", step_hostname},
	{"loopback", step_loopback},
	{"privileges", step_privileges},
	{"rlimits", step_rlimits},
	{"wait-go", step_wait_go},
	{"seccomp", step_seccomp},
	{"command", step_command},
	{"title", step_title},
};
#define N_CHILD_STEPS (sizeof(child_steps) / sizeof(child_steps[0]))
_Static_assert(N_CHILD_STEPS <= TIMING_MAX_STEPS, "timing.h holds every child step");

const char *child_step_name(size_t i)
{
	return i < N_CHILD_STEPS ? child_steps[i].name : NULL;
}

_Noreturn void child_main(const struct child_args *args)
{
	struct child c;

	memset(&c, 0, sizeof(c));
	c.a = *args;
	if (c.a.times)
		c.a.times->start_ns = timing_now_ns();
	for (size_t i = 0; i < N_CHILD_STEPS; i++) {
		if (child_steps[i].run(&c) < 0)
			report(c.a.err_fd, child_steps[i].name, c.msg);
		if (c.a.times)
			c.a.times->end_ns[i] = timing_now_ns();
	}
	close(c.a.err_fd); /* EOF reaches the parent once the command has exec'd */
	run_init(&c.a, c.cmd, &c.set);
}
