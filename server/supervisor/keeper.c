/* keeper.c - starting a sandbox's keeper and talking to it; see keeper.h.
 * The keeper process itself is keeperproc.c; the wire format keeperwire.h. */
#include "supervisor/keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/cgbox.h"
#include "labd/log.h"
#include "supervisor/keeperwire.h"
#include "supervisor/worker.h"

void keeper_sock_path(const char *state_dir, const char *sandbox_id, char *out, size_t len)
{
	snprintf(out, len, "%s/" KEEPER_DIR "/%s.sock", state_dir, sandbox_id);
}

/* sun_path holds 108 bytes; a longer path (a deep state dir) is reached through
 * its folder's fd, "/proc/self/fd/N/<name>".  *dfd is that fd (-1: none). */
static int sock_addr(const char *path, struct sockaddr_un *sa, int *dfd)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	*dfd = -1;
	if (!path[0])
		return -EINVAL;
	if (strlen(path) < sizeof(sa->sun_path)) {
		memcpy(sa->sun_path, path, strlen(path));
		return 0;
	}
	if (!slash || (size_t)(slash - path) >= sizeof(dir) || strlen(slash + 1) > 64)
		return -ENAMETOOLONG;
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	*dfd = open(dir[0] ? dir : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*dfd < 0)
		return -errno;
	snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s", *dfd, slash + 1);
	return 0;
}

/* The listening socket at path (an old one there replaced), mode 0600. */
static int listen_at(const char *path)
{
	struct sockaddr_un sa;
	int dfd, fd, rc = sock_addr(path, &sa, &dfd);

	if (rc < 0)
		return rc;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		rc = -errno;
	else if ((unlink(sa.sun_path) < 0 && errno != ENOENT) ||
		 bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(sa.sun_path, 0600) < 0 ||
		 listen(fd, 16) < 0)
		rc = -errno;
	if (rc < 0 && fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	return rc < 0 ? rc : fd;
}

/* The mount point of the hierarchy a /proc/<pid>/cgroup line names: controllers
 * "" is the v2 tree (a hybrid host's unified one); v1 lines by their controller. */
static const char *hierarchy(const struct cgbox_layout *lo, char *ctls)
{
	char *save = NULL;

	if (!ctls[0])
		return lo->mode == CGBOX_V2 ? lo->v2 : lo->v1[CGBOX_UNIFIED];
	if (lo->mode == CGBOX_V2)
		return "";
	for (char *c = strtok_r(ctls, ",", &save); c; c = strtok_r(NULL, ",", &save))
		for (int k = 0; k < CGBOX_UNIFIED; k++)
			if (strcmp(c, cgbox_ctl_name(k)) == 0 && lo->v1[k][0])
				return lo->v1[k];
	return ""; /* name=systemd and the like: not labd's */
}

/* Moves who into every cgroup of pid that labd's hierarchies hold (the
 * sandbox's: its memory, pids and CPU are charged with the user's).  0 or -errno. */
static int join_cgroups(pid_t pid, pid_t who)
{
	const struct cgbox_layout *lo = cgbox_host();
	char path[1200], line[1024];
	int rc = 0, joined = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if (!lo)
		return -ENODEV;
	if (!(f = fopen(path, "re")))
		return -errno;
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		char *ctls = strchr(line, ':'), *cg = ctls ? strchr(ctls + 1, ':') : NULL;
		if (!cg)
			continue;
		*ctls++ = '\0';
		*cg++ = '\0';
		cg[strcspn(cg, "\n")] = '\0';
		const char *mnt = hierarchy(lo, ctls);
		if (!mnt[0] || strstr(cg, "/..") || cg[0] != '/')
			continue;
		snprintf(path, sizeof(path), "%s%s/cgroup.procs", mnt, cg);
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || dprintf(fd, "%d\n", (int)who) < 0)
			rc = -errno;
		else
			joined++;
		if (fd >= 0)
			close(fd);
	}
	fclose(f);
	if (rc < 0)
		log_error("keeper: moving it into the cgroup %s: %s", path, strerror(-rc));
	return rc < 0 ? rc : joined ? 0 : -ENOENT;
}

static int check_spec(const struct keeper_spec *ks)
{
	if (!ks->sock_path || ks->cgroup_of <= 0 || ks->drain_fd < 0 ||
	    ks->n_held > KEEPER_HELD_MAX || (ks->log_path && !ks->log_path[0]))
		return -EINVAL;
	if (fcntl(ks->drain_fd, F_GETFD) < 0)
		return -EBADF;
	for (unsigned i = 0; i < ks->n_held; i++)
		if (fcntl(ks->held_fds[i], F_GETFD) < 0)
			return -EBADF;
	return 0;
}

/* Waits for the keeper's one int (0 or -errno) on its ready pipe. */
static int wait_ready(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int32_t rc = -ETIMEDOUT;
	ssize_t n;

	if (poll(&p, 1, KEEPER_CALL_TIMEOUT_MS) <= 0)
		return -ETIMEDOUT;
	n = read(fd, &rc, sizeof(rc));
	return n == (ssize_t)sizeof(rc) ? rc : -ECHILD; /* it died before it said */
}

int keeper_start(const struct keeper_spec *ks, pid_t *pid)
{
	int rc = check_spec(ks), lfd, ready[2];
	pid_t p;

	if (rc < 0)
		return rc;
	(void)cgbox_host(); /* detected once here, not in every keeper */
	if ((lfd = listen_at(ks->sock_path)) < 0)
		return lfd;
	if (pipe2(ready, O_CLOEXEC) < 0) {
		rc = -errno;
		close(lfd);
		return rc;
	}
	p = fork();
	if (p == 0)
		keeper_run(ks, lfd, ready[1]);
	rc = p < 0 ? -errno : 0;
	close(ready[1]);
	close(lfd);
	/* moved into the sandbox's cgroups once set up: there its CPU may be throttled
	 * (the sandbox's quota, which a booting Jupyter spends) */
	if (rc == 0 && ((rc = wait_ready(ready[0])) < 0 || (rc = join_cgroups(ks->cgroup_of, p)) < 0)) {
		kill(p, SIGKILL);
		waitpid(p, NULL, 0);
	}
	close(ready[0]);
	if (rc == 0)
		*pid = p;
	return rc;
}

static int connect_to(const char *sock_path)
{
	struct timeval tv = {.tv_sec = KEEPER_CALL_TIMEOUT_MS / 1000,
			     .tv_usec = (KEEPER_CALL_TIMEOUT_MS % 1000) * 1000};
	struct sockaddr_un sa;
	int dfd, fd, rc;

	if (!sock_path)
		return -EINVAL;
	if ((rc = sock_addr(sock_path, &sa, &dfd)) < 0)
		return rc;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		rc = -errno;
	else if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
		 setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
		 connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		rc = -errno;
	if (rc < 0 && fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	return rc < 0 ? rc : fd;
}

/* One request, with pass_fd (or none: -1) as SCM_RIGHTS: the workers' sender. */
static int send_req(int fd, const struct keeper_req *rq, int pass_fd)
{
	int rc = worker_send(fd, rq, sizeof(*rq), pass_fd);

	return rc == -EAGAIN ? -ETIMEDOUT : rc; /* the socket's send timeout ran out */
}

/* The reply, and the fds that came with it (at most max kept; the rest closed). */
static int recv_rep(int fd, struct keeper_rep *rp, int *fds, unsigned max, unsigned *n)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * KEEPER_HELD_MAX)];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = rp, .iov_len = sizeof(*rp)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	ssize_t got = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	unsigned k = 0;

	if (got < 0)
		return errno == EAGAIN ? -ETIMEDOUT : -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < cnt; i++) {
			int f;
			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (k < max && fds)
				fds[k++] = f;
			else
				close(f);
		}
	}
	if (n)
		*n = k;
	if (got == 0)
		return -ECONNRESET; /* refused, or gone mid-call */
	if (got != (ssize_t)sizeof(*rp) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
		return -EPROTO;
	return 0;
}

/* One call: connect, request, reply.  The reply's rc, or the transport's error. */
static int call(const char *sock_path, const struct keeper_req *rq, int pass_fd,
		struct keeper_rep *rp, int *fds, unsigned max, unsigned *n)
{
	int fd = connect_to(sock_path), rc;
	unsigned got = 0;

	if (fd < 0)
		return fd;
	memset(rp, 0, sizeof(*rp));
	rc = send_req(fd, rq, pass_fd);
	/* a refusal may be answered (and the connection closed) before we sent */
	if (rc == 0 || rc == -EPIPE || rc == -ECONNRESET) {
		int sent = rc;
		rc = recv_rep(fd, rp, fds, max, &got);
		if (rc == -ECONNRESET && sent < 0)
			rc = sent;
	}
	close(fd);
	if (rc == 0 && rp->rc < 0)
		rc = rp->rc;
	if (rc < 0)
		while (got > 0)
			close(fds[--got]);
	if (n)
		*n = got;
	return rc;
}

int keeper_fetch(const char *sock_path, int *fds, unsigned max, unsigned *n)
{
	struct keeper_req rq = {.magic = KEEPER_MAGIC, .op = KEEPER_OP_FETCH};
	struct keeper_rep rp;

	*n = 0;
	return call(sock_path, &rq, -1, &rp, fds, max, n);
}

int keeper_set_log(const char *sock_path, int log_fd, uint64_t max_bytes, uint64_t written_bytes)
{
	struct keeper_req rq = {.magic = KEEPER_MAGIC, .op = KEEPER_OP_SET_LOG,
				.max_bytes = max_bytes, .written_bytes = written_bytes};
	struct keeper_rep rp;

	return call(sock_path, &rq, log_fd, &rp, NULL, 0, NULL);
}

int keeper_sync(const char *sock_path, uint64_t *written)
{
	struct keeper_req rq = {.magic = KEEPER_MAGIC, .op = KEEPER_OP_SYNC};
	struct keeper_rep rp;
	int rc = call(sock_path, &rq, -1, &rp, NULL, 0, NULL);

	if (rc == 0 && written)
		*written = rp.written;
	return rc;
}

int keeper_stop(const char *sock_path)
{
	struct keeper_req rq = {.magic = KEEPER_MAGIC, .op = KEEPER_OP_STOP};
	struct keeper_rep rp;

	return call(sock_path, &rq, -1, &rp, NULL, 0, NULL);
}
