/* worker.c - forked workers for slow root work; see worker.h. */
#include "supervisor/worker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

int worker_spawn(worker_fn fn, void *arg, pid_t *pid, int *fd)
{
	int sv[2];
	pid_t child;

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
