/* keeperproc.c - the keeper process: set up, then drain and answer until the
 * output pipe's writers are gone; see keeper.h (the contract) and keeperwire.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "labd/log.h"
#include "supervisor/joblog.h"
#include "supervisor/keeper.h"
#include "supervisor/keeperwire.h"
#include "supervisor/runlog.h"

/* A sync drains what the pipe held when it was asked: at most the pipe's size
 * (1 MiB at most, fs.pipe-max-size's default), so this many reads, with room. */
#define DRAIN_READS_MAX 32
#define PEER_TIMEOUT_MS 500 /* a root peer that connected sends its request at once */

enum sink_kind { SINK_NONE, SINK_RUN, SINK_JOB };

struct keeper {
	int lfd, in_fd;
	int held[KEEPER_HELD_MAX];
	unsigned n_held;
	enum sink_kind sink;
	struct runlog run; /* its in_fd stays -1: the keeper reads, runlog_write writes */
	struct joblog job;
};

static char buf[RUNLOG_READ_BYTES];

/* ---- setting up ---------------------------------------------------------- */

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* Every fd but those in keep[] (and stderr, unless it is a pipe someone may
 * wait to see closed) is closed; 0 and 1 become /dev/null. */
static void close_others(int *keep, int n)
{
	struct stat st;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC), lo = 3, sorted[KEEPER_HELD_MAX + 4];

	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		if (fstat(2, &st) < 0 || S_ISFIFO(st.st_mode))
			dup2(null, 2);
		if (null > 2)
			close(null);
	}
	memcpy(sorted, keep, sizeof(int) * (size_t)n);
	qsort(sorted, (size_t)n, sizeof(int), cmp_int);
	for (int i = 0; i < n; i++) {
		if (sorted[i] > lo)
			close_range((unsigned)lo, (unsigned)sorted[i] - 1, 0);
		lo = sorted[i] + 1 > lo ? sorted[i] + 1 : lo;
	}
	close_range((unsigned)lo, ~0U, 0);
}

/* Moves fd above 2 (0-2 become /dev/null); -1 stays -1. */
static int high(int fd)
{
	return fd < 0 || fd > 2 ? fd : fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

static int set_up(struct keeper *k, const struct keeper_spec *ks, int *lfd, int *ready)
{
	int keep[KEEPER_HELD_MAX + 4], n = 0;
	sigset_t all;

	setsid(); /* no Ctrl-C of labd's terminal, no hangup of its session */
	sigfillset(&all);
	sigprocmask(SIG_UNBLOCK, &all, NULL); /* the supervisor blocks them for its signalfd */
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
	signal(SIGPIPE, SIG_IGN);
	log_set_tag("labd-keeper");
	prctl(PR_SET_NAME, "labd-keeper"); /* ps shows what it is */

	memset(k, 0, sizeof(*k));
	keep[n++] = *lfd = high(*lfd);
	keep[n++] = *ready = high(*ready);
	keep[n++] = k->in_fd = high(fcntl(ks->drain_fd, F_DUPFD_CLOEXEC, 3));
	for (unsigned i = 0; i < ks->n_held; i++)
		keep[n++] = k->held[k->n_held++] = fcntl(ks->held_fds[i], F_DUPFD_CLOEXEC, 3);
	for (int i = 0; i < n; i++)
		if (keep[i] < 0)
			return -errno;
	close_others(keep, n);
	k->lfd = *lfd;
	fcntl(k->in_fd, F_SETFL, fcntl(k->in_fd, F_GETFL) | O_NONBLOCK);

	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || dprintf(fd, "-1000\n") < 0)
		log_warn("keeper: oom_score_adj -1000: %s", strerror(errno));
	if (fd >= 0)
		close(fd);

	if (ks->log_path) {
		runlog_init(&k->run, -1, ks->log_path, ks->log_max_bytes, ks->log_gid);
		k->sink = SINK_RUN;
	}
	return 0;
}

/* ---- draining ------------------------------------------------------------ */

static void sink_write(struct keeper *k, const char *b, size_t n)
{
	if (k->sink == SINK_RUN)
		runlog_write(&k->run, b, n);
	else if (k->sink == SINK_JOB)
		joblog_append(&k->job, b, n);
}

static uint64_t sink_bytes(const struct keeper *k)
{
	return k->sink == SINK_RUN ? k->run.size_bytes : k->sink == SINK_JOB ? k->job.size_bytes : 0;
}

static void sink_close(struct keeper *k)
{
	if (k->sink == SINK_RUN)
		runlog_release(&k->run);
	else if (k->sink == SINK_JOB)
		joblog_close(&k->job);
	k->sink = SINK_NONE;
}

/* One read into the log.  1 while writers remain, 0 at EOF (in_fd closed). */
static int drain_once(struct keeper *k)
{
	ssize_t n;

	if (k->in_fd < 0)
		return 0;
	do
		n = read(k->in_fd, buf, sizeof(buf));
	while (n < 0 && errno == EINTR);
	if (n > 0)
		sink_write(k, buf, (size_t)n);
	if (n > 0 || (n < 0 && errno == EAGAIN))
		return 1;
	if (n < 0)
		log_warn("keeper: reading the output pipe: %s", strerror(errno));
	close(k->in_fd);
	k->in_fd = -1;
	return 0;
}

/* What the pipe holds now, into the current log. */
static void drain_now(struct keeper *k)
{
	for (int i = 0; i < DRAIN_READS_MAX && k->in_fd >= 0; i++) {
		struct pollfd p = {.fd = k->in_fd, .events = POLLIN};
		if (poll(&p, 1, 0) <= 0 || drain_once(k) == 0)
			break;
	}
}

_Noreturn static void finish(struct keeper *k, int status)
{
	sink_close(k);
	_exit(status);
}

/* ---- answering ----------------------------------------------------------- */

static void reply(int c, int32_t rc, uint64_t written, const int *fds, unsigned n)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * KEEPER_HELD_MAX)];
		struct cmsghdr align;
	} u;
	struct keeper_rep rp = {.rc = rc, .n_fds = n, .written = written};
	struct iovec iov = {.iov_base = &rp, .iov_len = sizeof(rp)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	if (n > 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * n);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * n);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * n);
	}
	if (sendmsg(c, &mh, MSG_NOSIGNAL) < 0)
		log_warn("keeper: answering a request: %s", strerror(errno));
}

/* Reads one request; its fd (set_log) in *fd.  0, or -EINVAL for anything that is
 * not exactly one well-formed request (any fd that came is closed). */
static int read_req(int c, struct keeper_req *rq, int *fd)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = rq, .iov_len = sizeof(*rq)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
			    .msg_controllen = sizeof(u.b)};
	ssize_t got = recvmsg(c, &mh, MSG_CMSG_CLOEXEC);
	int n_fds = 0;

	*fd = -1;
	for (struct cmsghdr *cm = got >= 0 ? CMSG_FIRSTHDR(&mh) : NULL; cm;
	     cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int f;
			memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (n_fds++ == 0)
				*fd = f;
			else
				close(f);
		}
	}
	if (got == (ssize_t)sizeof(*rq) && !(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) &&
	    rq->magic == KEEPER_MAGIC && rq->op >= KEEPER_OP_FETCH && rq->op <= KEEPER_OP_STOP &&
	    n_fds <= (rq->op == KEEPER_OP_SET_LOG ? 1 : 0))
		return 0;
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	return -EINVAL;
}

/* set_log: what the pipe held goes to the previous log, then fd is the log. */
static int set_log(struct keeper *k, const struct keeper_req *rq, int fd)
{
	char link[64], what[JOBLOG_PATH_MAX];
	struct stat st;
	ssize_t n;

	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || rq->max_bytes == 0)) {
		close(fd);
		return -EINVAL;
	}
	drain_now(k);
	sink_close(k);
	if (fd < 0)
		return 0;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, what, sizeof(what) - 1);
	what[n > 0 ? n : 0] = '\0';
	joblog_adopt(&k->job, fd, rq->max_bytes, rq->written_bytes, n > 0 ? what : "job log");
	k->sink = SINK_JOB;
	return 0;
}

static void on_request(struct keeper *k)
{
	struct timeval tv = {.tv_sec = 0, .tv_usec = PEER_TIMEOUT_MS * 1000};
	struct ucred cr;
	socklen_t len = sizeof(cr);
	struct keeper_req rq;
	int c = accept4(k->lfd, NULL, NULL, SOCK_CLOEXEC), fd, rc;

	if (c < 0)
		return;
	/* read before any answer: a socket closed with a request unread would reset
	 * the peer before it saw the refusal */
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	rc = read_req(c, &rq, &fd);
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 || cr.uid != 0) {
		if (fd >= 0)
			close(fd);
		reply(c, -EPERM, 0, NULL, 0); /* only root talks to a keeper */
		close(c);
		return;
	}
	if (rc == 0 && rq.op == KEEPER_OP_FETCH) {
		reply(c, 0, 0, k->held, k->n_held);
	} else if (rc == 0 && rq.op == KEEPER_OP_SET_LOG) {
		reply(c, set_log(k, &rq, fd), sink_bytes(k), NULL, 0);
	} else if (rc == 0) { /* sync, stop */
		drain_now(k);
		reply(c, 0, sink_bytes(k), NULL, 0);
	} else {
		reply(c, rc, 0, NULL, 0);
	}
	close(c);
	if (rc == 0 && rq.op == KEEPER_OP_STOP)
		finish(k, 0);
}

_Noreturn void keeper_run(const struct keeper_spec *ks, int listen_fd, int ready)
{
	struct keeper k;
	int32_t rc = set_up(&k, ks, &listen_fd, &ready);

	if (write(ready, &rc, sizeof(rc)) != (ssize_t)sizeof(rc) || rc < 0)
		_exit(1);
	close(ready);
	for (;;) {
		struct pollfd p[2] = {{.fd = k.lfd, .events = POLLIN},
				      {.fd = k.in_fd, .events = POLLIN}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			finish(&k, 1);
		/* the pipe first: a request that follows output sees it in the log */
		if (p[1].revents && drain_once(&k) == 0)
			finish(&k, 0); /* every writer gone, all it held written */
		if (p[0].revents & POLLIN)
			on_request(&k);
		if (k.in_fd < 0) /* a sync or set_log read the end */
			finish(&k, 0);
	}
}
