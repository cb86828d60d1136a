/* worker.c - forked workers for slow root work; see worker.h. */
#include "supervisor/worker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "labd/clock.h"
#include "labd/log.h"

/* The workers alive (not yet reaped): their limits, and which parent socket
 * each answers on, so that a killed one's EOF reads as -ETIMEDOUT. A worker
 * killed at its limit keeps its slot's fd and mark after it is reaped (the
 * reaper may run before its owner reads the socket), until that read. */
static struct worker_slot {
	pid_t pid; /* 0: reaped, or free */
	int fd;    /* the parent's end; -1 once read to its end or its number reused */
	long long kill_at_ms;
	bool killed;    /* SIGKILLed by us: at its limit or by worker_end */
	bool timed_out; /* at its limit */
} slots[WORKER_MAX];

static struct worker_slot *slot_of_pid(pid_t pid)
{
	for (int i = 0; pid > 0 && i < WORKER_MAX; i++)
		if (slots[i].pid == pid)
			return &slots[i];
	return NULL;
}

static struct worker_slot *slot_of_fd(int fd)
{
	for (int i = 0; fd >= 0 && i < WORKER_MAX; i++)
		if ((slots[i].pid || slots[i].timed_out) && slots[i].fd == fd)
			return &slots[i];
	return NULL;
}

/* Its process is gone: a timed-out one's mark stays until worker_recv says it. */
static void forget_pid(struct worker_slot *s)
{
	if (s->timed_out && s->fd >= 0)
		s->pid = 0;
	else
		*s = (struct worker_slot){.fd = -1};
}

/* A slot with no process: one whose worker ended unreaped (a zombie the
 * supervisor's reaper still gets: WNOWAIT) or was reaped by someone else's
 * waitpid (a test's) counts. Free ones first, then timed-out marks. */
static struct worker_slot *free_slot(void)
{
	struct worker_slot *mark = NULL;

	for (int i = 0; i < WORKER_MAX; i++) {
		siginfo_t si = {0};
		if (slots[i].pid && (waitid(P_PID, (id_t)slots[i].pid, &si,
					    WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid))
			forget_pid(&slots[i]);
		if (!slots[i].pid && !slots[i].timed_out)
			return &slots[i];
		if (!slots[i].pid && !mark)
			mark = &slots[i];
	}
	return mark;
}

int worker_spawn(worker_fn fn, void *arg, long long limit_ms, pid_t *pid, int *fd)
{
	struct worker_slot *s = free_slot(), *old;
	int sv[2];
	pid_t child;

	if (!s)
		return -EAGAIN;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	fflush(stdout);
	fflush(stderr);
	child = fork();
	if (child < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		return -e;
	}
	if (child == 0) {
		/* The supervisor blocks these for its signalfd; a worker takes the
		 * default actions. It dies with the supervisor rather than finish a
		 * start nobody will record. */
		sigset_t all;
		sigfillset(&all);
		sigprocmask(SIG_UNBLOCK, &all, NULL);
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		close(sv[0]);
		_exit(fn(arg, sv[1]));
	}
	close(sv[1]);
	if (fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0) {
		close(sv[0]);
		return -errno;
	}
	/* the number was closed by an earlier worker's owner: that slot no
	 * longer answers on it */
	if ((old = slot_of_fd(sv[0]))) {
		old->fd = -1;
		if (!old->pid)
			forget_pid(old);
	}
	*s = (struct worker_slot){child, sv[0], clock_ms() + limit_ms, false, false};
	*pid = child;
	*fd = sv[0];
	return 0;
}

int worker_send(int fd, const void *buf, size_t len, int pass_fd)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	if (pass_fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
	}
	return sendmsg(fd, &mh, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -errno;
}

ssize_t worker_recv(int fd, void *buf, size_t len, int *passed_fd)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf)};
	ssize_t n;

	*passed_fd = -1;
	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	struct worker_slot *s = n == 0 ? slot_of_fd(fd) : NULL;
	if (s && s->timed_out) {
		s->fd = -1; /* said once */
		if (!s->pid)
			forget_pid(s);
		return -ETIMEDOUT;
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(passed_fd, CMSG_DATA(c), sizeof(int));
	if (mh.msg_flags & MSG_TRUNC) {
		if (*passed_fd >= 0)
			close(*passed_fd);
		*passed_fd = -1;
		return -EMSGSIZE;
	}
	return n;
}

long long worker_tick(long long now_ms)
{
	long long next = -1;

	for (int i = 0; i < WORKER_MAX; i++) {
		struct worker_slot *s = &slots[i];
		if (!s->pid || s->killed)
			continue;
		if (now_ms >= s->kill_at_ms) {
			/* the child is not reaped yet (worker_reaped frees the slot):
			 * the pid is still this worker's */
			log_error("worker %d ran past its time limit: killed", (int)s->pid);
			kill(s->pid, SIGKILL);
			s->killed = s->timed_out = true;
			continue;
		}
		if (next < 0 || s->kill_at_ms < next)
			next = s->kill_at_ms;
	}
	return next < 0 ? -1 : next - now_ms;
}

void worker_reaped(pid_t pid)
{
	struct worker_slot *s = slot_of_pid(pid);

	if (s)
		forget_pid(s);
}

void worker_end(pid_t pid)
{
	struct worker_slot *s = slot_of_pid(pid);

	if (s && !s->killed) {
		kill(s->pid, SIGKILL);
		s->killed = true;
	}
}
