/* upstream.c - see upstream.h. */
#include "proxy/upstream.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "labd/log.h"

#define POOL_SLOTS 64 /* idle connections kept in all */

struct slot {
	char path[UPSTREAM_PATH_MAX];
	int fd; /* -1 = free */
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot pool[POOL_SLOTS];
static bool pool_ready;

static void pool_init_locked(void)
{
	if (pool_ready)
		return;
	for (int i = 0; i < POOL_SLOTS; i++)
		pool[i].fd = -1;
	pool_ready = true;
}

/* An idle keep-alive connection must have nothing to read; data or EOF means
 * the server closed it or broke protocol. */
static bool still_idle(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

static int connect_new(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return log_error("upstream socket path too long: %s", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return log_errno("upstream: socket");
	/* A local connect either succeeds or fails at once, so connect blocking
	 * and switch to non-blocking for the transfer. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		log_debug("upstream: connect %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

int upstream_get(const char *path, bool probe, bool *reused)
{
	int fd = -1;

	pthread_mutex_lock(&pool_lock);
	pool_init_locked();
	for (int i = 0; i < POOL_SLOTS && fd < 0; i++) {
		if (pool[i].fd < 0 || strcmp(pool[i].path, path) != 0)
			continue;
		int candidate = pool[i].fd;
		pool[i].fd = -1;
		if (!probe || still_idle(candidate))
			fd = candidate;
		else
			close(candidate);
	}
	pthread_mutex_unlock(&pool_lock);
	*reused = fd >= 0;
	return fd >= 0 ? fd : connect_new(path);
}

void upstream_put(const char *path, int fd)
{
	pthread_mutex_lock(&pool_lock);
	pool_init_locked();
	for (int i = 0; i < POOL_SLOTS; i++) {
		if (pool[i].fd < 0) {
			snprintf(pool[i].path, sizeof(pool[i].path), "%s", path);
			pool[i].fd = fd;
			fd = -1;
			break;
		}
	}
	pthread_mutex_unlock(&pool_lock);
	if (fd >= 0)
		close(fd);
}

void upstream_forget(const char *path)
{
	pthread_mutex_lock(&pool_lock);
	pool_init_locked();
	for (int i = 0; i < POOL_SLOTS; i++) {
		if (pool[i].fd >= 0 && (!path || strcmp(pool[i].path, path) == 0)) {
			close(pool[i].fd);
			pool[i].fd = -1;
		}
	}
	pthread_mutex_unlock(&pool_lock);
}

void upstream_clear(void)
{
	upstream_forget(NULL);
}
