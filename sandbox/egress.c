/* egress.c - root's side of a sandbox's outbound network; see egress.h.
 *
 * Order matters: the ruleset goes into the namespace first (an oifname rule needs no
 * interface yet), then pasta creates eth0 and the default route, all while the child
 * still waits for the parent's release, so no code of the user's ever runs unfiltered.
 * pasta runs as root (--runas 0): dropping to nobody before it opens the namespace
 * fails, because the namespace belongs to a user namespace nobody has no rights in.
 * It confines itself (own mount, ipc and uts namespaces, seccomp, no_new_privs, every
 * capability but CAP_SYS_ADMIN and CAP_NET_BIND_SERVICE dropped).  It starts in a
 * cgroup of its own ("<id>.net", memory and pids bounded: the sandbox's device filter
 * would refuse it /dev/net/tun) and, once it has configured the namespace, moves into
 * the sandbox's cgroup, so that its memory and CPU, which the user drives, count
 * against the user's limits; the teardown kills it with the sandbox.  Its pid and
 * start time are kept (<id>.pasta) to tell a dead pasta from a live one, and a restart
 * joins the namespace through a pidfd of the init whose start time matches
 * (egress_open_netns), never through a bare pid.  Ports are never forwarded
 * (-t/-u/-T/-U none: the default "auto" would join the host's loopback services and
 * the sandbox's), and --no-map-gw keeps the gateway address from meaning the host. */
#include "sandbox/egress.h"

#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "labd/log.h"
#include "sandbox/cgbox.h"
#include "sandbox/fail.h"
#include "sandbox/netveth.h"
#include "sandbox/state.h"
#include "sandbox/tool.h"

#define PASTA_MEM_BYTES (512ull << 20)
#define PASTA_PIDS 16
#define PASTA_READY_MS 10000

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

int egress_host_addrs(char *out, size_t len)
{
	struct ifaddrs *all, *a;
	size_t used = 0;

	out[0] = '\0';
	if (getifaddrs(&all) < 0)
		return fail_errno("getifaddrs");
	for (a = all; a; a = a->ifa_next) {
		char text[INET6_ADDRSTRLEN];
		int fam = a->ifa_addr ? a->ifa_addr->sa_family : AF_UNSPEC, n;
		const void *bin;

		if (fam == AF_INET)
			bin = &((struct sockaddr_in *)(void *)a->ifa_addr)->sin_addr;
		else if (fam == AF_INET6)
			bin = &((struct sockaddr_in6 *)(void *)a->ifa_addr)->sin6_addr;
		else
			continue;
		if (!inet_ntop(fam, bin, text, sizeof(text)))
			continue;
		n = snprintf(out + used, len - used, "%s%s/%d", used ? "," : "", text,
			     fam == AF_INET ? 32 : 128);
		if (n < 0 || (size_t)n >= len - used) {
			freeifaddrs(all);
			return fail_error("too many host addresses");
		}
		used += (size_t)n;
	}
	freeifaddrs(all);
	return 0;
}

/* Writes content to path (mode 0644, atomically) unless it already holds it. */
static int write_small_file(const char *path, const char *content)
{
	char have[256], tmp[SANDBOX_PATH_MAX + 16];
	size_t len = strlen(content);
	ssize_t n = -1;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) >= 0) {
		n = read(fd, have, sizeof(have));
		close(fd);
	}
	if (n == (ssize_t)len && memcmp(have, content, len) == 0)
		return 0;
	snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644)) < 0)
		return fail_errno("create %s", tmp);
	if (write(fd, content, len) != (ssize_t)len || fchmod(fd, 0644) < 0) {
		fail_errno("write %s", tmp);
		close(fd);
		unlink(tmp);
		return -1;
	}
	close(fd);
	if (rename(tmp, path) < 0) {
		fail_errno("rename %s", tmp);
		unlink(tmp);
		return -1;
	}
	return 0;
}

int egress_resolv_conf(const char *state_dir, char *out, size_t len)
{
	snprintf(out, len, "%s/egress-resolv.conf", state_dir);
	return write_small_file(out, "nameserver " EGRESS_DNS_ADDR "\noptions timeout:2 attempts:2\n");
}

/* [network] dns: pasta forwards to the first nameserver of the resolv.conf it reads
 * (pasta 2023_03_09 ignores --dns for forwarding), so it reads this file, bound over
 * /etc/resolv.conf in a mount namespace of its own (exec_pasta). */
static int upstream_conf(const struct sandbox_spec *s, char *out, size_t len)
{
	char content[128];

	out[0] = '\0';
	if (!s->net_dns || !s->net_dns[0])
		return 0;
	snprintf(out, len, "%s/egress-upstream-resolv.conf", s->state_dir);
	snprintf(content, sizeof(content), "nameserver %s\n", s->net_dns);
	return write_small_file(out, content);
}

void egress_cgroup_name(const char *id, char *out, size_t len)
{
	snprintf(out, len, "%s.net", id);
}

static void pasta_paths(const char *state_dir, const char *id, char *pidfile, char *logfile,
			size_t len)
{
	snprintf(pidfile, len, "%s/sandboxes/%s.pasta.pid", state_dir, id);
	snprintf(logfile, len, "%s/sandboxes/%s.pasta.log", state_dir, id);
}

/* root's record of the running pasta: "<pid> <start ticks>" */
static void record_path(const char *state_dir, const char *id, char *out, size_t len)
{
	snprintf(out, len, "%s/sandboxes/%s.pasta", state_dir, id);
}

void egress_files_remove(const char *state_dir, const char *id)
{
	char pidfile[SANDBOX_PATH_MAX], logfile[SANDBOX_PATH_MAX], record[SANDBOX_PATH_MAX];

	pasta_paths(state_dir, id, pidfile, logfile, sizeof(pidfile));
	record_path(state_dir, id, record, sizeof(record));
	unlink(pidfile);
	unlink(logfile);
	unlink(record);
}

int egress_open_netns(pid_t pid, uint64_t start_ticks, int *out)
{
	char ns[64];
	int pidfd, fd = -1, e;

	if (pid <= 0 || !start_ticks) {
		errno = ESRCH;
		return -1;
	}
	/* the pidfd names one process: if it is still alive after the open, the pid was
	 * not reused in between, so the namespace opened is its own */
	if ((pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0)
		return -1;
	snprintf(ns, sizeof(ns), "/proc/%d/ns/net", (int)pid);
	if (sandbox_proc_start_ticks(pid) != start_ticks)
		errno = ESRCH;
	else if ((fd = open(ns, O_RDONLY | O_CLOEXEC)) >= 0 &&
		 syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0) {
		close(fd);
		fd = -1;
		errno = ESRCH;
	}
	e = errno;
	close(pidfd);
	errno = e;
	if (fd < 0)
		return -1;
	*out = fd;
	return 0;
}

/* With a rate: caps the namespace's TCP receive buffers at the policer's burst. A
 * download is policed after pasta took the data, and this pasta resends a whole
 * window at once after a loss; a window larger than the bucket is dropped again and
 * again, which stalled downloads for a minute on a loaded host. A window within the
 * bucket passes after one refill. "min default max" as tcp_rmem wants. 0 or -1. */
static int cap_receive_window(uint64_t window_bytes)
{
	char text[64];
	int fd = open("/proc/sys/net/ipv4/tcp_rmem", O_WRONLY | O_CLOEXEC);
	int len = snprintf(text, sizeof(text), "4096 %llu %llu\n",
			   (unsigned long long)(window_bytes < 131072 ? window_bytes : 131072),
			   (unsigned long long)window_bytes);
	bool ok = fd >= 0 && write(fd, text, (size_t)len) == len;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

/* nft -f - run as root inside pid's network namespace, the ruleset on a socket (a
 * write to an nft that died is EPIPE, not a SIGPIPE killing the caller); with
 * window_bytes, the receive window capped there too (cap_receive_window). */
/* In the sandbox's namespace before nft: the receive window capped. */
static int cap_window(void *arg)
{
	if (cap_receive_window(*(const uint64_t *)arg) == 0)
		return 0;
	dprintf(2, "cannot cap tcp_rmem: %s", strerror(errno)); /* into the message */
	return -1;
}

static int run_nft(const char *nft, pid_t pid, const char *rules, uint64_t window_bytes)
{
	char ns[64];
	char *argv[] = {(char *)nft, "-f", "-", NULL};
	struct tool_run t = {.argv = argv, .input = rules, .fd3 = -1,
			     .prepare = window_bytes ? cap_window : NULL, .arg = &window_bytes};
	int rc;

	snprintf(ns, sizeof(ns), "/proc/%d/ns/net", (int)pid);
	if ((t.nsfd = open(ns, O_RDONLY | O_CLOEXEC)) < 0)
		return fail_errno("open %s", ns);
	rc = tool_run(&t);
	close(t.nsfd);
	return rc;
}

static int install_rules(const struct sandbox_spec *s, pid_t pid)
{
	char host[4096], why[160], deny[1200];
	static char rules[EGRESS_RULESET_MAX]; /* not reentrant, like the rest of libsandbox */

	if (egress_host_addrs(host, sizeof(host)) < 0)
		return -1;
	/* on veth the other sandboxes are one hop away: their range is denied inside too */
	snprintf(deny, sizeof(deny), "%s%s%s",
		 s->net_path == SANDBOX_NET_VETH ? s->veth_range : "",
		 s->net_path == SANDBOX_NET_VETH ? "," : "", s->net_deny ? s->net_deny : "");
	if (egress_ruleset(deny, host, s->peers ? SANDBOX_PEER_IFNAME : NULL, s->max_connections,
			   s->egress_bytes_per_s, rules, sizeof(rules), why, sizeof(why)) < 0)
		return fail_error("network deny list: %s", why);
	return run_nft(s->nft_path, pid, rules,
		       s->egress_bytes_per_s ? egress_burst_bytes(s->egress_bytes_per_s) : 0);
}

/* The argv of pasta for the namespace exec_pasta opens on fd 3; strings in bufs. */
static void pasta_argv(const char *pidfile,
		       const char *logfile, char *argv[32], char bufs[3][SANDBOX_PATH_MAX + 16])
{
	int n = 0;

	argv[n++] = "pasta";
	argv[n++] = "--config-net";
	argv[n++] = "--no-map-gw";
	argv[n++] = "-t"; argv[n++] = "none";
	argv[n++] = "-u"; argv[n++] = "none";
	argv[n++] = "-T"; argv[n++] = "none";
	argv[n++] = "-U"; argv[n++] = "none";
	argv[n++] = "--foreground";
	argv[n++] = "--quiet";
	argv[n++] = "--runas"; argv[n++] = "0";
	argv[n++] = "--dns-forward"; argv[n++] = EGRESS_DNS_ADDR;
	snprintf(bufs[0], sizeof(bufs[0]), "%s", pidfile);
	snprintf(bufs[1], sizeof(bufs[1]), "%s", logfile);
	/* fd 3, opened by exec_pasta: the sandbox's init is non-dumpable once it runs, and
	 * pasta (having dropped CAP_SYS_PTRACE) could not open /proc/<init>/ns/net then */
	snprintf(bufs[2], sizeof(bufs[2]), "/proc/self/fd/3");
	argv[n++] = "--pid"; argv[n++] = bufs[0];
	argv[n++] = "--log-file"; argv[n++] = bufs[1];
	argv[n++] = "--netns"; argv[n++] = bufs[2];
	argv[n] = NULL;
}

/* pasta's stdout and stderr go to its log file too: what it says before it opens the
 * file (a bad option, a namespace it cannot join) is then there for the failure message. */
static _Noreturn void exec_pasta(const struct sandbox_spec *s, const char *cgroup, char *argv[],
				 const char *logfile, const char *upstream, int nsfd)
{
	/* fd 3 without O_CLOEXEC: pasta's --netns */
	if (nsfd == 3 ? fcntl(3, F_SETFD, 0) < 0 : dup2(nsfd, 3) < 0)
		_exit(123);
	const struct cgbox_layout *lo = cgbox_host();
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int log = open(logfile, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);

	/* labbox run: pasta goes with it (same uid, so the flag survives --runas 0) */
	if (s->die_with_parent)
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (!lo || cgbox_attach(lo, s->cgroup_parent, cgroup, getpid()) < 0 || null < 0 ||
	    log < 0 || dup2(null, 0) < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0)
		_exit(125);
	tool_close_from(4);
	setsid();
	if (upstream[0] && (unshare(CLONE_NEWNS) < 0 ||
			    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
			    mount(upstream, "/etc/resolv.conf", NULL, MS_BIND, NULL) < 0))
		_exit(124);
	/* default dispositions and no blocked signal: pasta 2023_03_09 refuses to start
	 * when SIGPIPE is already ignored (labd's supervisor ignores it), and a blocked
	 * SIGTERM would keep it from stopping */
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t none;
	for (int sig = 1; sig < NSIG; sig++)
		sigaction(sig, &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execv(s->pasta_path, argv);
	_exit(127);
}

/* The last line pasta logged, for the failure message. */
static void last_log_line(const char *logfile, char *out, size_t len)
{
	char buf[1024];
	ssize_t n = -1;
	int fd = open(logfile, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	out[0] = '\0';
	if (fd >= 0) {
		off_t end = lseek(fd, 0, SEEK_END);
		if (end > 0)
			n = pread(fd, buf, sizeof(buf) - 1, end > (off_t)sizeof(buf) - 1 ? end - (off_t)sizeof(buf) + 1 : 0);
		close(fd);
	}
	if (n <= 0)
		return;
	buf[n] = '\0';
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	const char *nl = strrchr(buf, '\n'), *line = nl ? nl + 1 : buf;
	size_t n_line = strnlen(line, len - 1);
	memcpy(out, line, n_line);
	out[n_line] = '\0';
}

/* Ready once the pid file has content (pasta writes it after configuring the
 * namespace); a pasta that exits first is the failure. */
static int wait_ready(pid_t c, const char *pidfile, const char *logfile)
{
	char line[256];
	struct stat st;
	int status;

	for (int waited_ms = 0; waited_ms < PASTA_READY_MS; waited_ms += 5) {
		if (stat(pidfile, &st) == 0 && st.st_size > 0)
			return 0;
		if (waitpid(c, &status, WNOHANG) == c) {
			last_log_line(logfile, line, sizeof(line));
			return fail_error("pasta exited with status %d%s%s",
					  WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
					  line[0] ? ": " : "", line);
		}
		sleep_ms(5);
	}
	return fail_error("pasta did not configure the namespace within %d ms", PASTA_READY_MS);
}

/* A configured pasta moves from its start-up cgroup into the sandbox's (the user's
 * limits hold it from now on), and root records it; the emptied cgroup goes. */
static int charge_to_sandbox(const struct sandbox_spec *s, const char *id, const char *cgroup,
			     pid_t c)
{
	const struct cgbox_layout *lo = cgbox_host();
	char record[SANDBOX_PATH_MAX], text[64];

	if (cgbox_attach(lo, s->cgroup_parent, id, c) < 0)
		return fail_errno("move pasta into the sandbox's cgroup");
	record_path(s->state_dir, id, record, sizeof(record));
	snprintf(text, sizeof(text), "%d %llu\n", (int)c,
		 (unsigned long long)sandbox_proc_start_ticks(c));
	if (write_small_file(record, text) < 0)
		return -1;
	if (cgbox_remove(lo, s->cgroup_parent, cgroup) < 0)
		log_warn("sandbox %s: pasta's start-up cgroup %s not removed", id, cgroup);
	return 0;
}

static int start_pasta(const struct sandbox_spec *s, const char *id, pid_t pid, uint64_t ticks)
{
	const struct cgbox_layout *lo = cgbox_host();
	struct cgbox_limits lim = {.mem_bytes = PASTA_MEM_BYTES, .pids_max = PASTA_PIDS};
	char pidfile[SANDBOX_PATH_MAX], logfile[SANDBOX_PATH_MAX], cgroup[SANDBOX_ID_MAX + 8];
	char bufs[3][SANDBOX_PATH_MAX + 16], *argv[32], upstream[SANDBOX_PATH_MAX];
	int nsfd;
	pid_t c;

	if (!lo)
		return fail_error("no usable cgroup hierarchy");
	egress_cgroup_name(id, cgroup, sizeof(cgroup));
	pasta_paths(s->state_dir, id, pidfile, logfile, sizeof(pidfile));
	unlink(pidfile);
	if (upstream_conf(s, upstream, sizeof(upstream)) < 0)
		return -1;
	if (egress_open_netns(pid, ticks, &nsfd) < 0)
		return fail_errno("the network namespace of init %d", (int)pid);
	if (cgbox_create(lo, s->cgroup_parent, cgroup, &lim) < 0) {
		close(nsfd);
		return -1;
	}
	pasta_argv(pidfile, logfile, argv, bufs);
	if ((c = fork()) < 0) {
		close(nsfd);
		return fail_errno("fork pasta");
	}
	if (c == 0)
		exec_pasta(s, cgroup, argv, logfile, upstream, nsfd);
	close(nsfd);
	if (wait_ready(c, pidfile, logfile) < 0)
		return -1;
	return charge_to_sandbox(s, id, cgroup, c);
}

/* Whether the pasta root recorded for sandbox id still runs: 1, 0 when it is gone,
 * -1 when there is no record (no egress). */
static int pasta_alive(const char *state_dir, const char *id)
{
	char record[SANDBOX_PATH_MAX], text[64];
	unsigned long long ticks;
	ssize_t n;
	int fd, pid;

	record_path(state_dir, id, record, sizeof(record));
	if ((fd = open(record, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return -1;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	text[n > 0 ? n : 0] = '\0';
	if (sscanf(text, "%d %llu", &pid, &ticks) != 2 || pid <= 0 || !ticks)
		return 0;
	return sandbox_proc_start_ticks(pid) == ticks;
}

int sandbox_net_check(const struct sandbox_spec *s, const struct sandbox_handle *h)
{
	const struct cgbox_layout *lo = cgbox_host();
	char cgroup[SANDBOX_ID_MAX + 8];

	int veth = h->pid > 0 ? netveth_check(s, h) : -1;

	if (veth != -1) /* a veth sandbox: its link and host table (netveth.c) */
		return veth == -2 ? log_error("sandbox %s: its veth could not be made again: the "
					      "runtime has no network", h->id)
				  : veth;
	/* no record: the sandbox has no egress */
	if (!lo || h->pid <= 0 || pasta_alive(s->state_dir, h->id) != 0)
		return 0;
	log_warn("sandbox %s: pasta is gone: restarting it (connections through the old one are lost)",
		 h->id);
	/* a start-up cgroup a failed restart left goes first: start_pasta makes it anew */
	egress_cgroup_name(h->id, cgroup, sizeof(cgroup));
	if (cgbox_remove(lo, s->cgroup_parent, cgroup) < 0 ||
	    start_pasta(s, h->id, h->pid, h->start_time_ticks) < 0)
		return log_error("sandbox %s: pasta could not be restarted: the runtime has no network",
				 h->id);
	return 1;
}

int egress_start(const struct sandbox_spec *s, const char *id, pid_t pid, uint64_t start_ticks)
{
	if (install_rules(s, pid) < 0)
		return -1;
	if (s->net_path == SANDBOX_NET_VETH)
		return netveth_start(s, id, pid, start_ticks);
	return start_pasta(s, id, pid, start_ticks) < 0 ? -1 : 0;
}
