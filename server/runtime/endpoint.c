/* endpoint.c - see endpoint.h. */
#include "runtime/endpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "labd/log.h"
#include "proto/link.h"

static struct link_secret secret; /* set once before threads; len 0 = none */

void endpoint_set_secret(const unsigned char *bytes, size_t len)
{
	link_secret_set(&secret, bytes, len);
}

bool endpoint_is_tcp(const char *target)
{
	return strncmp(target, ENDPOINT_TCP_PREFIX, strlen(ENDPOINT_TCP_PREFIX)) == 0;
}

/* "tcp:HOST:PORT/PATH" into "HOST:PORT" and PATH; -EINVAL when malformed. */
static int split(const char *target, char *hostport, size_t len, const char **path)
{
	const char *hp = target + strlen(ENDPOINT_TCP_PREFIX), *slash = strchr(hp, '/');

	if (!endpoint_is_tcp(target) || !slash || !slash[1] || (size_t)(slash - hp) >= len)
		return -EINVAL;
	snprintf(hostport, len, "%.*s", (int)(slash - hp), hp);
	*path = slash + 1;
	return 0;
}

int endpoint_connect_tcp(const char *target, int timeout_ms, bool nonblock)
{
	char hostport[80];
	const char *path;
	int fd;

	if (split(target, hostport, sizeof(hostport), &path) < 0)
		return -EINVAL;
	if (secret.len == 0) {
		log_warn("runtime endpoint %s: no [slurm] secret_file to sign the data line with",
			 target);
		return -ENOKEY;
	}
	if ((fd = link_data_connect(&secret, hostport, path, timeout_ms)) < 0) {
		log_debug("runtime endpoint %s: connect: %s", target, strerror(-fd));
		return fd;
	}
	if (!nonblock)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}
