/* endpoint.c - see endpoint.h. */
#include "runtime/endpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "labd/clock.h"
#include "labd/log.h"
#include "proto/link.h"

static struct link_secret secret; /* set once before threads; len 0 = none */

void endpoint_set_secret(const unsigned char *bytes, size_t len)
{
	link_secret_clear(&secret);
	if (len > sizeof(secret.bytes))
		return;
	memcpy(secret.bytes, bytes, len);
	secret.len = len;
}

bool endpoint_is_tcp(const char *target)
{
	return strncmp(target, ENDPOINT_TCP_PREFIX, strlen(ENDPOINT_TCP_PREFIX)) == 0;
}

/* "tcp:HOST:PORT/PATH" into host, port and path; -EINVAL when malformed. */
static int split(const char *target, char *host, size_t hostlen, char *port, size_t portlen,
		 const char **path)
{
	const char *hp = target + strlen(ENDPOINT_TCP_PREFIX), *slash = strchr(hp, '/');
	const char *colon;

	if (!endpoint_is_tcp(target) || !slash || !slash[1])
		return -EINVAL;
	for (colon = slash; colon > hp && *colon != ':'; colon--)
		;
	if (colon == hp || *colon != ':' || slash - colon < 2 || (size_t)(slash - colon) > portlen)
		return -EINVAL;
	if (hp[0] == '[') { /* [v6]:port */
		if (colon[-1] != ']' || (size_t)(colon - hp - 2) >= hostlen)
			return -EINVAL;
		snprintf(host, hostlen, "%.*s", (int)(colon - hp - 2), hp + 1);
	} else {
		if ((size_t)(colon - hp) >= hostlen)
			return -EINVAL;
		snprintf(host, hostlen, "%.*s", (int)(colon - hp), hp);
	}
	snprintf(port, portlen, "%.*s", (int)(slash - colon - 1), colon + 1);
	*path = slash + 1;
	return 0;
}

/* A connected TCP socket to host:port within deadline_ms, or a negative errno. */
static int connect_numeric(const char *host, const char *port, long long deadline_ms)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	int fd, rc = 0, soerr = 0;
	socklen_t len = sizeof(soerr);

	/* numeric only: a name lookup would block a proxy worker for as long as DNS likes */
	if (getaddrinfo(host, port, &hints, &res) != 0 || !res)
		return -EINVAL;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
	} else if (connect(fd, res->ai_addr, res->ai_addrlen) < 0 && errno != EINPROGRESS) {
		rc = -errno;
	} else {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		long long left = deadline_ms - clock_ms();
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			rc = -ETIMEDOUT;
		else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0 || soerr)
			rc = soerr ? -soerr : -errno;
	}
	freeaddrinfo(res);
	if (rc < 0 && fd >= 0)
		close(fd);
	return rc < 0 ? rc : fd;
}

int endpoint_connect_tcp(const char *target, int timeout_ms, bool nonblock)
{
	char host[64], port[8], line[LINK_DATA_LINE_MAX];
	const char *path;
	int fd, n;

	if (split(target, host, sizeof(host), port, sizeof(port), &path) < 0)
		return -EINVAL;
	if (secret.len == 0) {
		log_warn("runtime endpoint %s: no [slurm] secret_file to sign the data line with",
			 target);
		return -ENOKEY;
	}
	if ((n = link_data_line_make(&secret, path, clock_wall_ms(), line, sizeof(line))) < 0)
		return n;
	if ((fd = connect_numeric(host, port, clock_ms() + timeout_ms)) < 0) {
		log_debug("runtime endpoint %s: connect: %s", target, strerror(-fd));
		return fd;
	}
	/* a fresh connection's send buffer takes the whole line at once */
	if (send(fd, line, (size_t)n, MSG_NOSIGNAL) != n) {
		int rc = errno ? -errno : -EIO;
		close(fd);
		return rc;
	}
	if (!nonblock)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}
