/* Unit tests: labd-web's own Jupyter client (runtime/jupyter.h) asks only the
 * runtime's listener. The socket's folder is the user's: a link planted in
 * place of the socket, or a listener of another uid, gets no request (the
 * review's "follows the user's socket symlink without a peer check"). */
#include "unit.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "runtime/jupyter.h"

struct server {
	int fd;
	int requests; /* requests that reached the listener (bytes read) */
	pthread_t thread;
};

/* Answers each connection's request with 200 {} and counts it. */
static void *serve(void *arg)
{
	static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
				    "Connection: close\r\n\r\n{}";
	struct server *s = arg;
	char buf[4096];
	int c;

	while ((c = accept(s->fd, NULL, NULL)) >= 0) {
		if (recv(c, buf, sizeof(buf), 0) > 0) {
			__atomic_add_fetch(&s->requests, 1, __ATOMIC_SEQ_CST);
			(void)!send(c, reply, sizeof(reply) - 1, MSG_NOSIGNAL);
		}
		close(c);
	}
	return NULL;
}

static void server_start(struct server *s, const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	memset(s, 0, sizeof(*s));
	assert_true(strlen(path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s->fd >= 0);
	assert_int_equal(bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s->fd, 8), 0);
	assert_int_equal(pthread_create(&s->thread, NULL, serve, s), 0);
}

static void server_stop(struct server *s)
{
	shutdown(s->fd, SHUT_RDWR);
	pthread_join(s->thread, NULL);
	close(s->fd);
}

static int ask(const char *path, uid_t peer_uid, int *status)
{
	char body[256];

	*status = 0;
	return jupyter_request(path, peer_uid, "GET", "alice", "api/kernels", "tok", 2000, status,
			       body, sizeof(body));
}

static void test_only_the_runtime_listener_is_asked(void **state)
{
	char dir[] = "/tmp/labd-jupyter-XXXXXX", real[128], link[128], other[128];
	struct server srv;
	int status;
	(void)state;

	assert_non_null(mkdtemp(dir));
	snprintf(real, sizeof(real), "%s/elsewhere.sock", dir); /* "a host socket" */
	snprintf(link, sizeof(link), "%s/jupyter.sock", dir);
	snprintf(other, sizeof(other), "%s/notasocket", dir);
	server_start(&srv, real);

	/* the listener runs as us: asked and answered */
	assert_int_equal(ask(real, geteuid(), &status), 0);
	assert_int_equal(status, 200);
	assert_int_equal(srv.requests, 1);
	/* the owner of the socket file stands in for a caller without the uid */
	assert_int_equal(ask(real, JUPYTER_PEER_OWNER, &status), 0);
	assert_int_equal(srv.requests, 2);

	/* the user swapped jupyter.sock for a link to the host's socket */
	assert_int_equal(symlink(real, link), 0);
	assert_int_equal(ask(link, geteuid(), &status), -1);
	assert_int_equal(ask(link, JUPYTER_PEER_OWNER, &status), -1);
	assert_int_equal(jupyter_kernels_busy(link, "alice", "tok"), -1);
	assert_int_equal(srv.requests, 2);

	/* a listener of another uid than the runtime's: no request sent */
	assert_int_equal(ask(real, geteuid() + 1, &status), -1);
	assert_int_equal(jupyter_kernels_busy_as(real, geteuid() + 1, "alice", "tok"), -1);
	assert_int_equal(srv.requests, 2);

	/* not a socket at all */
	FILE *f = fopen(other, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(ask(other, geteuid(), &status), -1);

	server_stop(&srv);
	unlink(link);
	unlink(real);
	unlink(other);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_only_the_runtime_listener_is_asked),
	};
	return cmocka_run_group_tests_name("jupyter", tests, NULL, NULL);
}
