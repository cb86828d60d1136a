/* upstream.c - see upstream.h. */
#include "proxy/upstream.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "labd/log.h"
#include "labd/str.h"
#include "runtime/endpoint.h"

#define IDLE_SLOTS 64 /* idle connections kept per thread */

struct slot {
	char path[UPSTREAM_PATH_MAX];
	uid_t peer_uid; /* checked when it connected */
	int fd;         /* -1 = free */
};

/* The idle connections of one thread that proxies: a connection stays with the
 * worker that connected it, whose epoll set watches it (workers_watch). The lock
 * is taken by other threads only to forget a runtime's connections. */
struct idle_conns {
	pthread_mutex_t lock;
	struct slot slot[IDLE_SLOTS];
	struct idle_conns *next; /* all sets, for upstream_forget */
};

static pthread_mutex_t all_idle_lock = PTHREAD_MUTEX_INITIALIZER;
static struct idle_conns *all_idle;
static _Thread_local struct idle_conns *mine;

/* The calling thread's set, made on first use; NULL when out of memory. */
static struct idle_conns *my_idle_conns(void)
{
	struct idle_conns *p = mine;

	if (p)
		return p;
	if (!(p = calloc(1, sizeof(*p))))
		return NULL;
	pthread_mutex_init(&p->lock, NULL);
	for (int i = 0; i < IDLE_SLOTS; i++)
		p->slot[i].fd = -1;
	pthread_mutex_lock(&all_idle_lock);
	p->next = all_idle;
	all_idle = p;
	pthread_mutex_unlock(&all_idle_lock);
	return mine = p;
}

/* An idle keep-alive connection must have nothing to read; data or EOF means
 * the server closed it or broke protocol. */
static bool still_idle(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* Who answers on the socket must be the runtime's own sandbox: the name is in
 * a directory its user can write (or a link planted there could lead to
 * another user's Jupyter, or to a socket of labd's own), but the kernel's
 * record of the peer cannot be forged from inside a sandbox. */
static bool peer_ok(int fd, const char *path, uid_t want)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		log_warn("upstream %s: SO_PEERCRED: %s: refused", path, strerror(errno));
		return false;
	}
	if (cred.uid != want) {
		log_warn("upstream %s: peer uid %u is not the runtime's uid %u: refused", path,
			 (unsigned)cred.uid, (unsigned)want);
		return false;
	}
	return true;
}

static int connect_new(const char *path, uid_t peer_uid)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	/* A runtime on a Slurm node: its data port checks the line and the peer's uid
	 * (there is no SO_PEERCRED across a network). The connect is waited for, up to
	 * UPSTREAM_TCP_CONNECT_MS, since the line must be written first: on a cluster's
	 * network that is well under a millisecond, or a refusal at once. */
	if (endpoint_is_tcp(path)) {
		fd = endpoint_connect_tcp(path, UPSTREAM_TCP_CONNECT_MS, true);
		return fd < 0 ? -1 : fd;
	}
	if (strlen(path) >= sizeof(sa.sun_path))
		return log_error("upstream socket path too long: %s", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return log_errno("upstream: socket");
	/* Never a blocking connect: a socket whose owner stopped accepting has
	 * a full backlog, and a blocking connect to it would hang the worker
	 * thread (and every connection it serves). Non-blocking, a full backlog
	 * is EAGAIN at once; a connect still in progress (a stream socket that
	 * is not local) completes while the request waits parked on EPOLLOUT,
	 * under the proxy's connect deadline. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
		log_debug("upstream: connect %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	if (!peer_ok(fd, path, peer_uid)) {
		close(fd);
		return -1;
	}
	return fd;
}

int upstream_get(const char *path, uid_t peer_uid, bool probe, bool *reused)
{
	struct idle_conns *p = my_idle_conns();
	int fd = -1;

	if (p) {
		pthread_mutex_lock(&p->lock);
		for (int i = 0; i < IDLE_SLOTS && fd < 0; i++) {
			struct slot *s = &p->slot[i];
			if (s->fd < 0 || s->peer_uid != peer_uid || strcmp(s->path, path) != 0)
				continue;
			int candidate = s->fd;
			s->fd = -1;
			if (!probe || still_idle(candidate))
				fd = candidate;
			else
				close(candidate);
		}
		pthread_mutex_unlock(&p->lock);
	}
	*reused = fd >= 0;
	return fd >= 0 ? fd : connect_new(path, peer_uid);
}

void upstream_put(const char *path, uid_t peer_uid, int fd)
{
	struct idle_conns *p = my_idle_conns();

	if (p) {
		pthread_mutex_lock(&p->lock);
		for (int i = 0; i < IDLE_SLOTS; i++) {
			struct slot *s = &p->slot[i];
			if (s->fd < 0) {
				str_copy(s->path, sizeof(s->path), path);
				s->peer_uid = peer_uid;
				s->fd = fd;
				fd = -1;
				break;
			}
		}
		pthread_mutex_unlock(&p->lock);
	}
	if (fd >= 0)
		close(fd);
}

void upstream_forget(const char *path)
{
	pthread_mutex_lock(&all_idle_lock);
	for (struct idle_conns *p = all_idle; p; p = p->next) {
		pthread_mutex_lock(&p->lock);
		for (int i = 0; i < IDLE_SLOTS; i++) {
			struct slot *s = &p->slot[i];
			if (s->fd >= 0 && (!path || strcmp(s->path, path) == 0)) {
				close(s->fd);
				s->fd = -1;
			}
		}
		pthread_mutex_unlock(&p->lock);
	}
	pthread_mutex_unlock(&all_idle_lock);
}

void upstream_clear(void)
{
	upstream_forget(NULL);
}
