/* supervisor.c - see supervisor.h. */
#include "supervisor/supervisor.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "config/images.h"
#include "supervisor/channel.h"
#include "supervisor/host.h"
#include "supervisor/host_pool.h"
#include "supervisor/host_runtime.h"
#include "supervisor/netpath.h"
#include "supervisor/joblog.h"
#include "supervisor/node.h"
#include "supervisor/startcheck.h"
#include "supervisor/statedir.h"
#include "supervisor/worker.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "labd/privdrop.h"
#include "web/web.h"

#define RESTART_MIN_MS 200
#define RESTART_MAX_MS 10000
#define STABLE_AFTER_MS 30000 /* a child that lived this long resets the backoff */
#define STOP_GRACE_MS 10000

struct supervisor {
	const struct labd_config *cfg;
	struct privdrop_user user;
	int listen_fd, web_root_fd, signal_fd;
	/* `labd node`: the child is the link (node.h), not labd-web; no HTTP listener or
	 * web root, the data port's socket instead */
	bool node;
	int data_fd;
	const char *child_name; /* "web process" or "link process", for the log */
	pid_t child;
	struct channel *channel; /* to the web (or link) process, NULL when none */
	long long child_started_ms, restart_at_ms, stop_deadline_ms;
	int backoff_ms;
	int stopping;
	long long give_up_ms; /* stop waiting for runtimes to end after this */
	struct host *host; /* every sandbox: runtimes and job pools */
};

/* signalfd, channel, two fds per sandbox (worker or pidfd, log pipe), five per
 * pool (worker, pidfd, agent status and output, job worker) */
#define MAX_POLL (2 + HOST_POLL_MAX) /* the signalfd, the channel, the host */

#define BIND_RETRY_EVERY_MS 100
#define BIND_WAIT_MAX_MS 15000

static int bind_listener(const char *address)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1, rc = config_listen_sockaddr(address, &ss, &len);

	if (rc == -EINVAL)
		return log_error("bad listen address %s", address);
	if (rc < 0)
		return log_error("listen address %s is not a numeric IP address", address);
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return log_errno("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* After a crash of the previous supervisor its web process may still hold
	 * the port while it notices and stops: wait for it rather than fail the
	 * restart that would re-adopt everything. */
	for (int waited_ms = 0; bind(fd, (struct sockaddr *)&ss, len) < 0; waited_ms += BIND_RETRY_EVERY_MS) {
		if (errno != EADDRINUSE || waited_ms >= BIND_WAIT_MAX_MS) {
			log_errno("listen on %s", address);
			close(fd);
			return -1;
		}
		if (waited_ms == 0)
			log_warn("%s is in use (the previous labd still stopping?): waiting up to %d s",
				 address, BIND_WAIT_MAX_MS / 1000);
		usleep(BIND_RETRY_EVERY_MS * 1000);
	}
	if (listen(fd, 1024) < 0) {
		log_errno("listen on %s", address);
		close(fd);
		return -1;
	}
	return fd;
}

/* Closes every fd above stderr except the listed ones. */
static void close_fds_except(int *keep, int n)
{
	int lo = 3;

	for (int i = 0; i < n; i++) /* sort: n is tiny */
		for (int j = i + 1; j < n; j++)
			if (keep[j] < keep[i]) {
				int t = keep[i];
				keep[i] = keep[j];
				keep[j] = t;
			}
	for (int i = 0; i < n; i++) {
		if (keep[i] > lo)
			close_range((unsigned)lo, (unsigned)keep[i] - 1, 0);
		lo = keep[i] + 1 > lo ? keep[i] + 1 : lo;
	}
	close_range((unsigned)lo, ~0U, 0);
}

static void spawn_web(struct supervisor *s)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		log_errno("socketpair");
		s->restart_at_ms = clock_ms() + s->backoff_ms;
		return;
	}
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		log_errno("fork");
		close(sv[0]);
		close(sv[1]);
		s->restart_at_ms = clock_ms() + s->backoff_ms;
		return;
	}
	if (pid == 0) {
		/* The web process inherits nothing of the supervisor's but what it
		 * needs: no sandbox pidfds, status pipes or the signalfd. */
		if (s->node) {
			int keep[] = {sv[1], s->data_fd};
			close_fds_except(keep, 2);
			node_link_main(s->cfg, &s->user, sv[1], s->data_fd);
		}
		int keep[] = {s->listen_fd, sv[1], s->web_root_fd};
		close_fds_except(keep, 3);
		web_main(s->cfg, &s->user, s->listen_fd, sv[1], s->web_root_fd);
	}
	close(sv[1]);
	s->child = pid;
	s->channel = channel_new(sv[0], s->host);
	s->child_started_ms = clock_ms();
	log_info("started %s %d", s->child_name, (int)pid);
}

static void close_channel(struct supervisor *s)
{
	channel_free(s->channel);
	s->channel = NULL;
}

static void on_channel_readable(struct supervisor *s)
{
	int rc = channel_on_readable(s->channel);

	if (rc == 1) {
		close_channel(s); /* the child is exiting; SIGCHLD follows */
	} else if (rc < 0) {
		/* A web process that breaks the protocol is not trusted to go on:
		 * the restart gives a fresh one; the sandboxes keep running. */
		close_channel(s);
		if (s->child > 0)
			kill(s->child, SIGKILL);
	}
}

/* What the host runs, in the order their records are read. */
static const struct host_purpose *const purposes[] = {&host_runtime, &host_pool};

/* Events from the sandboxes go to whichever web process listens now. */
static void emit_event(void *ctx, json_t *event)
{
	struct supervisor *s = ctx;
	channel_emit(s->channel, event);
}

static void emit_event_fd(void *ctx, json_t *event, int fd)
{
	struct supervisor *s = ctx;
	channel_emit_fd(s->channel, event, fd);
}

static void describe_exit(const struct supervisor *s, pid_t pid, int status)
{
	if (WIFEXITED(status))
		log_info("%s %d exited with status %d", s->child_name, (int)pid, WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		log_warn("%s %d was killed by signal %d", s->child_name, (int)pid, WTERMSIG(status));
}

static void reap_children(struct supervisor *s)
{
	int status;
	pid_t pid;

	/* The web process and the sandbox workers (their results come over their
	 * sockets); sandbox inits are never our children. */
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		worker_reaped(pid);
		if (pid != s->child)
			continue;
		describe_exit(s, pid, status);
		s->child = 0;
		close_channel(s);
		if (s->stopping)
			continue;
		long long lived = clock_ms() - s->child_started_ms;
		s->backoff_ms = lived >= STABLE_AFTER_MS ? RESTART_MIN_MS
				: s->backoff_ms * 2 > RESTART_MAX_MS ? RESTART_MAX_MS
								      : s->backoff_ms * 2;
		s->restart_at_ms = clock_ms() + s->backoff_ms;
		log_warn("restarting the %s in %d ms", s->child_name, s->backoff_ms);
	}
}

static void begin_stop(struct supervisor *s, int sig)
{
	if (s->stopping)
		return;
	log_info("signal %d: stopping", sig);
	s->stopping = 1;
	s->stop_deadline_ms = clock_ms() + STOP_GRACE_MS;
	if (s->child > 0)
		kill(s->child, SIGTERM);
	/* kept pools run on with their keepers; what is under way (a start, a
	 * staging, an upload, a teardown) is finished first, so the next supervisor
	 * finds each pool at a step it can take over */
	s->give_up_ms = clock_ms() + 2 * STOP_GRACE_MS;
	if (s->cfg->keep_on_shutdown) {
		host_keep_all(s->host);
	} else {
		host_stop_all(s->host, "labd is shutting down");
		/* each box gets its grace period, then is killed; allow for that */
		s->give_up_ms = clock_ms() + s->cfg->stop_grace_s * 1000 + STOP_GRACE_MS;
	}
}

/* Stopping and nothing left to wait for (or waited long enough). */
static bool stop_done(const struct supervisor *s)
{
	if (!s->stopping || s->child != 0)
		return false;
	if (clock_ms() > s->give_up_ms)
		return true;
	if (s->cfg->keep_on_shutdown)
		return host_busy(s->host) == 0;
	return host_live(s->host) == 0;
}

static void on_signal(struct supervisor *s)
{
	struct signalfd_siginfo si;

	while (read(s->signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGCHLD)
			reap_children(s);
		else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
			begin_stop(s, (int)si.ssi_signo);
	}
}

static int poll_timeout(const struct supervisor *s, int host_ms)
{
	long long deadline = s->stopping ? (s->child ? s->stop_deadline_ms : s->give_up_ms)
			     : s->child ? -1
					: s->restart_at_ms;
	long long left = deadline < 0 ? -1 : deadline - clock_ms();
	if (left < 0 && deadline >= 0)
		left = 0;
	if (host_ms >= 0 && (left < 0 || host_ms < left))
		left = host_ms;
	return (int)left;
}

static void run_loop(struct supervisor *s)
{
	while (!stop_done(s)) {
		if (!s->stopping && s->child == 0 && clock_ms() >= s->restart_at_ms)
			spawn_web(s);
		struct pollfd fds[MAX_POLL] = {{.fd = s->signal_fd, .events = POLLIN},
					       {.fd = channel_fd(s->channel), .events = POLLIN}};
		int host_ms = host_tick(s->host);
		long long worker_ms = worker_tick(clock_ms()); /* kills those past their limit */
		if (worker_ms >= 0 && (host_ms < 0 || worker_ms < host_ms))
			host_ms = (int)worker_ms;
		int n = host_pollfds(s->host, fds + 2, MAX_POLL - 2);
		/* fd -1 entries are ignored by poll, so the layout stays fixed */
		if (poll(fds, (nfds_t)(2 + n), poll_timeout(s, host_ms)) < 0 &&
		    errno != EINTR) {
			log_errno("poll");
			break;
		}
		if (fds[0].revents & POLLIN)
			on_signal(s);
		if (s->channel && (fds[1].revents & (POLLIN | POLLHUP)))
			on_channel_readable(s);
		host_on_events(s->host, fds + 2, n);
		if (s->stopping && s->child > 0 && clock_ms() >= s->stop_deadline_ms) {
			log_warn("%s %d did not stop in time: killing it", s->child_name, (int)s->child);
			kill(s->child, SIGKILL);
			s->stop_deadline_ms = clock_ms() + 1000;
		}
	}
}

/* Where to point a browser: labd's UI is served on every host name but the
 * user origins, and its cookie is host-only, so the address printed is the
 * one the handoff back from a user origin leads to (ui_origin, or the
 * user_domain itself), not the listening IP. */
static void print_listening(const struct labd_config *cfg)
{
	const char *port = strrchr(cfg->listen, ':');

	if (cfg->ui_origin[0])
		printf("labd %s: listening on %s; open %s/\n", LABD_VERSION, cfg->listen,
		       cfg->ui_origin);
	else if (cfg->origin_per_user)
		printf("labd %s: listening on %s; open http://%s%s/\n", LABD_VERSION, cfg->listen,
		       cfg->user_domain, port ? port : "");
	else
		printf("labd %s: listening on http://%s/\n", LABD_VERSION, cfg->listen);
	fflush(stdout);
}

/* Said once at start, not fatal: an egress start fails (egress_tools_missing). Root
 * does not see the plans, so with [quota] network = none it is only information. */
static void log_egress_missing(const struct labd_config *cfg)
{
	const char *tool = startcheck_egress_missing(cfg);

	if (!tool)
		return;
	if (cfg->quota_network == 1)
		log_warn("[network] %s is missing: every runtime and job with the default network "
			 "(egress) will be refused; install nftables and passt, or set [quota] "
			 "network = none", tool);
	else
		log_info("[network] %s is missing: a plan with network egress will be refused",
			 tool);
}

/* The supervisor's parts, started in order and stopped in reverse (as
 * sandbox/start.c's steps and web_main's parts): a part that fails is named
 * in the log, and those before it are stopped again. Each start returns 0 or
 * a negative errno (its own error logged). */
static int start_state(struct supervisor *s)
{
	if (privdrop_lookup(s->cfg->user, &s->user) < 0 ||
	    privdrop_prepare_state_dir(s->cfg->state_dir, &s->user) < 0 ||
	    statedir_prepare(s->cfg->state_dir, s->cfg->home_images, s->user.gid,
			     joblog_dir_mode(s->cfg->backend_kind)) < 0 ||
	    statedir_lock(s->cfg->state_dir) < 0)
		return -EIO;
	images_log_missing(s->cfg); /* logged, not fatal: a start on one fails (image_missing) */
	log_egress_missing(s->cfg);
	log_info("sandbox network path: %s (%s)", netpath_name(s->cfg), s->cfg->net_path_why);
	return 0;
}

/* Runtimes and job pools keep running across a supervisor restart and are
 * taken over from their records (host_runtime.h, host_pool.h). */
static int start_host(struct supervisor *s)
{
	s->host = host_new(s->cfg, s->cfg->state_dir, purposes, 2, emit_event, s);
	if (s->host)
		host_set_emit_fd(s->host, emit_event_fd);
	return s->host ? 0 : -EIO;
}

static void stop_host(struct supervisor *s)
{
	close_channel(s);
	host_free(s->host);
	s->host = NULL;
}

static int start_web_root(struct supervisor *s)
{
	if (s->node)
		return 0;
	s->web_root_fd = open(s->cfg->web_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return s->web_root_fd < 0 ? log_errno("open web root %s", s->cfg->web_root), -errno : 0;
}

static void stop_web_root(struct supervisor *s)
{
	if (s->web_root_fd >= 0)
		close(s->web_root_fd);
	s->web_root_fd = -1;
}

/* The HTTP listener, or on a node the data port: bound by root, so a restarted link
 * serves the same socket without a gap. */
static int start_listener(struct supervisor *s)
{
	if (s->node) {
		s->data_fd = bind_listener(s->cfg->node_data_listen);
		return s->data_fd < 0 ? -EADDRNOTAVAIL : 0;
	}
	s->listen_fd = bind_listener(s->cfg->listen);
	return s->listen_fd < 0 ? -EADDRNOTAVAIL : 0;
}

static void stop_listener(struct supervisor *s)
{
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	if (s->data_fd >= 0)
		close(s->data_fd);
	s->listen_fd = s->data_fd = -1;
}

static int start_signals(struct supervisor *s)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	s->signal_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	return s->signal_fd < 0 ? log_errno("signalfd"), -errno : 0;
}

static void stop_signals(struct supervisor *s)
{
	close(s->signal_fd);
	s->signal_fd = -1;
}

static const struct supervisor_part {
	const char *name;
	int (*start)(struct supervisor *s);
	void (*stop)(struct supervisor *s); /* NULL: nothing to undo */
} parts[] = {
	{"state", start_state, NULL},
	{"host", start_host, stop_host},
	{"web root", start_web_root, stop_web_root},
	{"listener", start_listener, stop_listener},
	{"signals", start_signals, stop_signals},
};
#define N_PARTS (sizeof(parts) / sizeof(parts[0]))

static void stop_parts(struct supervisor *s, size_t started)
{
	while (started-- > 0)
		if (parts[started].stop)
			parts[started].stop(s);
}

static int run(const struct labd_config *cfg, bool node)
{
	struct supervisor s = {.cfg = cfg, .backoff_ms = RESTART_MIN_MS, .node = node,
			       .child_name = node ? "link process" : "web process",
			       .listen_fd = -1, .web_root_fd = -1, .signal_fd = -1, .data_fd = -1};
	size_t i;

	log_set_tag("labd");
	prctl(PR_SET_NAME, "labd", 0, 0, 0);
	for (i = 0; i < N_PARTS; i++)
		if (parts[i].start(&s) < 0) {
			log_error("could not start: part %s failed", parts[i].name);
			stop_parts(&s, i);
			return 1;
		}
	if (node) {
		printf("labd %s: node %s, data port %s, linking to %s\n", LABD_VERSION,
		       cfg->node_name, cfg->node_data_listen, cfg->node_head);
		fflush(stdout);
	} else {
		print_listening(cfg);
	}
	run_loop(&s);
	log_info("stopped");
	stop_parts(&s, N_PARTS);
	return 0;
}

int supervisor_run(const struct labd_config *cfg)
{
	return run(cfg, false);
}

int supervisor_run_node(const struct labd_config *cfg)
{
	return run(cfg, true);
}
