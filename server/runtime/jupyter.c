/* jupyter.c - see jupyter.h. */
#include "runtime/jupyter.h"
#include "runtime/endpoint.h"

#include "labd/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define JUPYTER_TCP_CONNECT_MS 2000 /* a node's data port (endpoint.h) */

struct response {
	char *body;
	size_t len, cap;
	bool done;
};

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct response *r = p->data;
	size_t room = r->cap - 1 - r->len;
	size_t n = len < room ? len : room;
	memcpy(r->body + r->len, at, n);
	r->len += n;
	return 0;
}

static int on_complete(http_parser *p)
{
	((struct response *)p->data)->done = true;
	return 0;
}

/* Waits for fd to become ready before the deadline; false on timeout. */
static bool wait_fd(int fd, short events, long long deadline)
{
	struct pollfd p = {.fd = fd, .events = events};
	long long left = deadline - clock_ms();
	return left > 0 && poll(&p, 1, (int)left) == 1;
}

/* Sends all of len bytes before the deadline; 0 or -1. */
static int send_all(int fd, const char *data, size_t len, long long deadline)
{
	while (len > 0) {
		ssize_t sent = send(fd, data, len, MSG_NOSIGNAL);
		if (sent < 0 && errno == EINTR)
			continue;
		if (sent < 0 && errno == EAGAIN && wait_fd(fd, POLLOUT, deadline))
			continue;
		if (sent <= 0)
			return -1;
		data += sent;
		len -= (size_t)sent;
	}
	return 0;
}

/* A connected socket to the runtime's Jupyter, or -1. The socket's name lies
 * in a folder the runtime's user writes, so the name may have been swapped
 * for a link to any socket of the host: the last component is opened without
 * following a link and must be a socket, the connect goes through that opened
 * inode (never the name again), and the kernel's record of who listens must
 * be peer_uid (JUPYTER_PEER_OWNER: the socket file's owner), as the proxy's
 * upstream.c checks. */
static int connect_runtime(const char *socket_path, uid_t peer_uid)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct stat st;
	int pfd, fd = -1;

	if (endpoint_is_tcp(socket_path)) { /* a node's: its data port checks the peer */
		fd = endpoint_connect_tcp(socket_path, JUPYTER_TCP_CONNECT_MS, true);
		return fd < 0 ? -1 : fd;
	}
	pfd = open(socket_path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return -1;
	if (fstat(pfd, &st) < 0 || !S_ISSOCK(st.st_mode))
		goto out;
	if (peer_uid == JUPYTER_PEER_OWNER)
		peer_uid = st.st_uid;
	if (st.st_uid != peer_uid)
		goto out;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", pfd);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		goto out;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != peer_uid) {
		close(fd);
		fd = -1;
	}
out:
	close(pfd);
	return fd;
}

int jupyter_request(const char *socket_path, uid_t peer_uid, const char *method,
		    const char *user, const char *api_path, const char *token, int timeout_ms,
		    int *status, char *body, size_t bodylen)
{
	return jupyter_send(socket_path, peer_uid, method, user, api_path, token, NULL,
			    timeout_ms, status, body, bodylen);
}

int jupyter_send(const char *socket_path, uid_t peer_uid, const char *method, const char *user,
		 const char *api_path, const char *token, const char *json_body, int timeout_ms,
		 int *status, char *body, size_t bodylen)
{
	static const http_parser_settings settings = {.on_body = on_body,
						      .on_message_complete = on_complete};
	struct response r = {.body = body, .cap = bodylen};
	long long deadline = clock_ms() + timeout_ms;
	size_t body_bytes = json_body ? strlen(json_body) : 0;
	char req[JUPYTER_HEAD_MAX], buf[8192];
	http_parser parser;
	int fd, rc = -1, n;

	if (bodylen == 0)
		return -1;
	body[0] = '\0';
	n = snprintf(req, sizeof(req),
		     "%s /user/%s/%s HTTP/1.1\r\nHost: localhost\r\nAuthorization: token %s\r\n"
		     "%sContent-Length: %zu\r\nConnection: close\r\n\r\n",
		     method, user, api_path, token,
		     json_body ? "Content-Type: application/json\r\n" : "", body_bytes);
	if (n < 0 || n >= (int)sizeof(req))
		return -1;
	fd = connect_runtime(socket_path, peer_uid);
	if (fd < 0)
		return -1;
	if (!wait_fd(fd, POLLOUT, deadline) || send_all(fd, req, (size_t)n, deadline) < 0 ||
	    send_all(fd, json_body, body_bytes, deadline) < 0)
		goto out;
	http_parser_init(&parser, HTTP_RESPONSE);
	parser.data = &r;
	while (!r.done && wait_fd(fd, POLLIN, deadline)) {
		ssize_t got = recv(fd, buf, sizeof(buf), 0);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got < 0)
			break;
		http_parser_execute(&parser, &settings, buf, (size_t)got);
		if (got == 0 || HTTP_PARSER_ERRNO(&parser) != HPE_OK)
			break;
	}
	if (r.done) {
		*status = (int)parser.status_code;
		rc = 0;
	}
out:
	body[r.len] = '\0';
	close(fd);
	return rc;
}

int jupyter_kernels_busy(const char *socket_path, const char *user, const char *token)
{
	return jupyter_kernels_busy_as(socket_path, JUPYTER_PEER_OWNER, user, token);
}

int jupyter_kernels_busy_as(const char *socket_path, uid_t peer_uid, const char *user,
			    const char *token)
{
	char body[65536];
	int status, busy = 0;
	json_t *list, *k;
	size_t i;

	if (jupyter_request(socket_path, peer_uid, "GET", user, "api/kernels", token, 1000,
			    &status, body, sizeof(body)) < 0 ||
	    status != 200 || !(list = json_loads(body, 0, NULL)))
		return -1;
	json_array_foreach(list, i, k) {
		const char *state = json_string_value(json_object_get(k, "execution_state"));
		if (state && strcmp(state, "busy") == 0)
			busy = 1;
	}
	json_decref(list);
	return busy;
}
