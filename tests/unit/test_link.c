/* Unit tests: the node link (proto/link.h) over real loopback TCP and real TLS:
 * a good handshake, hello and relay (a descriptor dropped and flagged), a wrong key
 * refused on both sides, bad frames refused; the secret file's checks; the data
 * line: good, wrong key, stale, replayed, malformed, a full nonce cache; the
 * data paths a node serves; the job shells' terminals a node's link keeps (a pty
 * master kept under a token by the relay, claimed once, resized until done,
 * closed when its claim time passes). */
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>

#include "labd/clock.h"
#include "proto/link.h"
#include "runtime/endpoint.h"

static struct link_secret key_a, key_b;

static void fill_secret(struct link_secret *s, unsigned char seed)
{
	memset(s, 0, sizeof(*s));
	for (size_t i = 0; i < 48; i++)
		s->bytes[i] = (unsigned char)(seed + i * 7);
	s->len = 48;
}

/* ---- a head stand-in on loopback: accepts one connection in a thread ---- */

struct head {
	int listen_fd;
	char addr[64];
	struct link_ctx *ctx;
	pthread_t thread;
	int rc;
	json_t *hello;
	struct link_conn *conn;
};

static void *accept_one(void *arg)
{
	struct head *h = arg;
	int fd = accept(h->listen_fd, NULL, NULL);

	h->rc = fd < 0 ? -errno : link_accept(h->ctx, fd, &h->hello, &h->conn);
	return NULL;
}

static void head_start(struct head *h, const struct link_secret *key)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);

	memset(h, 0, sizeof(*h));
	h->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(h->listen_fd >= 0);
	assert_int_equal(bind(h->listen_fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(h->listen_fd, 4), 0);
	assert_int_equal(getsockname(h->listen_fd, (struct sockaddr *)&sin, &len), 0);
	snprintf(h->addr, sizeof(h->addr), "127.0.0.1:%u", ntohs(sin.sin_port));
	h->ctx = link_ctx_server(key);
	assert_non_null(h->ctx);
	assert_int_equal(pthread_create(&h->thread, NULL, accept_one, h), 0);
}

static void head_join(struct head *h)
{
	pthread_join(h->thread, NULL);
}

static void head_free(struct head *h)
{
	json_decref(h->hello);
	link_conn_free(h->conn);
	link_ctx_free(h->ctx);
	close(h->listen_fd);
}

static json_t *hello_of(const char *name)
{
	return json_pack("{s:s, s:s, s:s, s:[i,i], s:i, s:I}", "type", "node_hello", "name", name,
			 "data", "198.18.0.2:7001", "gpus", 3, 1, "cpus", 8, "memory_bytes",
			 (json_int_t)(16LL << 30));
}

/* The node dials and says hello; the head gets it with the TLS identity. */
static struct link_conn *node_dial(struct head *h, const struct link_secret *key, const char *name,
				   json_t *hello)
{
	struct link_ctx *ctx = link_ctx_client(key, name);
	struct link_conn *c = NULL;

	assert_non_null(ctx);
	int rc = link_dial(ctx, h->addr, &c);
	link_ctx_free(ctx); /* the connection does not need its context any more */
	if (rc == 0 && hello)
		assert_int_equal(link_frame_write(c, hello), 0);
	return c;
}

static void test_hello_and_frames(void **state)
{
	struct head h;
	json_t *hello = hello_of("gpu-01"), *got = NULL, *ping = json_pack("{s:s,s:i}", "type", "ping", "id", 5);
	(void)state;

	head_start(&h, &key_a);
	struct link_conn *node = node_dial(&h, &key_a, "gpu-01", hello);
	assert_non_null(node);
	head_join(&h);
	assert_int_equal(h.rc, 0);
	assert_string_equal(link_conn_name(h.conn), "gpu-01");
	assert_true(json_equal(h.hello, hello));
	/* frames both ways */
	assert_int_equal(link_frame_write(h.conn, ping), 0);
	assert_int_equal(link_frame_read(node, &got), 0);
	assert_true(json_equal(got, ping));
	json_decref(got);
	assert_int_equal(link_frame_write(node, ping), 0);
	assert_int_equal(link_frame_read(h.conn, &got), 0);
	assert_true(json_equal(got, ping));
	json_decref(got);
	/* an orderly close reads as 1 */
	link_conn_free(node);
	assert_int_equal(link_frame_read(h.conn, &got), 1);
	head_free(&h);
	json_decref(hello);
	json_decref(ping);
}

static void test_wrong_key_refused(void **state)
{
	struct head h;
	json_t *hello = hello_of("gpu-02");
	(void)state;

	head_start(&h, &key_a);
	struct link_conn *node = node_dial(&h, &key_b, "gpu-02", hello);
	head_join(&h);
	assert_null(node);
	assert_int_equal(h.rc, -EACCES); /* the head refused it */
	assert_null(h.conn);
	assert_null(h.hello);
	head_free(&h);
	json_decref(hello);
}

/* The hello's name must be the identity the key was proven for; fields are checked. */
static void test_hello_checked(void **state)
{
	struct head h;
	json_t *hello = hello_of("gpu-03");
	char err[160];
	(void)state;

	head_start(&h, &key_a);
	struct link_conn *node = node_dial(&h, &key_a, "gpu-04", hello); /* says another name */
	head_join(&h);
	assert_int_equal(h.rc, -EPROTO);
	link_conn_free(node);
	head_free(&h);

	assert_int_equal(link_hello_check(hello, "gpu-03", err, sizeof(err)), 0);
	json_object_set_new(hello, "extra", json_true());
	assert_int_equal(link_hello_check(hello, NULL, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "extra"));
	json_object_del(hello, "extra");
	json_object_set_new(hello, "data", json_string("nohost"));
	assert_int_equal(link_hello_check(hello, NULL, err, sizeof(err)), -EPROTO);
	json_object_set_new(hello, "data", json_string("10.0.0.1:70000"));
	assert_int_equal(link_hello_check(hello, NULL, err, sizeof(err)), -EPROTO);
	json_object_set_new(hello, "data", json_string("n1:7001"));
	json_object_set_new(hello, "gpus", json_pack("[i]", -1));
	assert_int_equal(link_hello_check(hello, NULL, err, sizeof(err)), -EPROTO);
	json_object_set_new(hello, "gpus", json_array());
	json_object_set_new(hello, "cpus", json_integer(0));
	assert_int_equal(link_hello_check(hello, NULL, err, sizeof(err)), -EPROTO);
	json_object_set_new(hello, "cpus", json_integer(1));
	assert_int_equal(link_hello_check(hello, NULL, err, sizeof(err)), 0);
	json_object_set_new(hello, "type", json_string("hello"));
	assert_int_equal(link_hello_check(hello, NULL, err, sizeof(err)), -EPROTO);
	json_decref(hello);
}

/* A frame with length 0, one over the bound, one that is no JSON object, one cut
 * short by a close: each refused, never waited on. */
static void test_bad_frames(void **state)
{
	static const struct {
		const char *bytes;
		size_t len;
		int want;
	} cases[] = {
		{"\0\0\0\0", 4, -EPROTO},
		{"\0\1\0\1{", 5, -EPROTO},     /* 65537 bytes announced */
		{"\0\0\0\2[]", 6, -EPROTO},    /* not an object */
		{"\0\0\0\3{\"a", 7, -EPROTO},  /* closed inside the frame */
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct head h;
		json_t *hello = hello_of("gpu-05"), *got = NULL;
		head_start(&h, &key_a);
		struct link_conn *node = node_dial(&h, &key_a, "gpu-05", hello);
		head_join(&h);
		assert_int_equal(h.rc, 0);
		assert_int_equal(link_write_bytes(node, cases[i].bytes, cases[i].len), 0);
		link_conn_free(node); /* the close ends the cut-short one */
		assert_int_equal(link_frame_read(h.conn, &got), cases[i].want);
		assert_null(got);
		head_free(&h);
		json_decref(hello);
	}
}

struct relay_arg {
	struct link_conn *c;
	int seq_fd, rc;
	struct link_shells *shells; /* NULL: every descriptor is dropped */
};

static void *relay_thread(void *arg)
{
	struct relay_arg *r = arg;
	r->rc = link_relay(r->c, r->seq_fd, -1, r->shells);
	return NULL;
}

/* Node side relays its seqpacket to the head: a message goes through both ways; one
 * sent with a descriptor arrives with "fd_dropped"; closing the seqpacket ends the
 * relay with 0 and the head reads the close. */
static void test_relay(void **state)
{
	struct head h;
	json_t *hello = hello_of("gpu-06"), *got = NULL, *msg = json_pack("{s:s,s:i,s:b}", "type", "reply", "id", 9, "ok", 1);
	int sv[2], p[2];
	char buf[256], cbuf[CMSG_SPACE(sizeof(int))] = {0};
	pthread_t t;
	(void)state;

	head_start(&h, &key_a);
	struct link_conn *node = node_dial(&h, &key_a, "gpu-06", hello);
	head_join(&h);
	assert_int_equal(h.rc, 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	struct relay_arg r = {.c = node, .seq_fd = sv[1]};
	assert_int_equal(pthread_create(&t, NULL, relay_thread, &r), 0);

	/* supervisor -> head */
	char *text = json_dumps(msg, JSON_COMPACT);
	assert_int_equal(send(sv[0], text, strlen(text), 0), (ssize_t)strlen(text));
	assert_int_equal(link_frame_read(h.conn, &got), 0);
	assert_true(json_equal(got, msg));
	json_decref(got);
	/* head -> supervisor */
	assert_int_equal(link_frame_write(h.conn, msg), 0);
	ssize_t n = recv(sv[0], buf, sizeof(buf), 0);
	assert_int_equal(n, (ssize_t)strlen(text));
	assert_memory_equal(buf, text, (size_t)n);
	/* with a descriptor: dropped, flagged */
	assert_int_equal(pipe(p), 0);
	struct iovec iov = {.iov_base = text, .iov_len = strlen(text)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &p[0], sizeof(int));
	assert_int_equal(sendmsg(sv[0], &mh, 0), (ssize_t)strlen(text));
	close(p[0]);
	assert_int_equal(link_frame_read(h.conn, &got), 0);
	assert_true(json_is_true(json_object_get(got, "fd_dropped")));
	json_object_del(got, "fd_dropped");
	assert_true(json_equal(got, msg));
	json_decref(got);
	/* the relay closed its copy: the pipe's read end is gone, a write fails */
	assert_int_equal(write(p[1], "x", 1), -1);
	assert_int_equal(errno, EPIPE);
	close(p[1]);
	/* the supervisor's end closes: the relay returns 0 */
	close(sv[0]);
	pthread_join(t, NULL);
	assert_int_equal(r.rc, 0);
	close(sv[1]);
	link_conn_free(node);
	assert_int_equal(link_frame_read(h.conn, &got), 1);
	free(text);
	head_free(&h);
	json_decref(hello);
	json_decref(msg);
}

/* ---- the secret file ---- */

static void test_secret_file(void **state)
{
	char dir[64], path[128], err[256];
	struct link_secret s;
	(void)state;

	unit_tempdir(dir);
	unit_write(dir, "short", "0123456789", path);
	chmod(path, 0600);
	assert_int_equal(link_secret_read(path, &s, err, sizeof(err)), -EINVAL);
	unit_write(dir, "good", "0123456789abcdef0123456789abcdef!", path);
	chmod(path, 0644);
	assert_int_equal(link_secret_read(path, &s, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "open to others"));
	chmod(path, 0640);
	assert_int_equal(link_secret_read(path, &s, err, sizeof(err)), 0);
	assert_int_equal(s.len, 33);
	snprintf(path, sizeof(path), "%s/missing", dir);
	assert_int_equal(link_secret_read(path, &s, err, sizeof(err)), -ENOENT);
	unit_rmdir(dir);
}

/* ---- the data line ---- */

#define T0 1800000000000LL
#define PATH_OK "runtimes/alice/run/jupyter.sock"

static void test_data_line(void **state)
{
	struct link_nonces *seen = link_nonces_new(8);
	char line[LINK_DATA_LINE_MAX], line2[LINK_DATA_LINE_MAX], path[256];
	(void)state;

	assert_true(link_data_line_make(&key_a, PATH_OK, T0, line, sizeof(line)) > 0);
	assert_int_equal(line[strlen(line) - 1], '\n');
	assert_int_equal(strncmp(line, "LABD-DATA1 " PATH_OK " 1800000000000 ", 43), 0);
	/* the wrong key: refused, and the nonce not spent */
	assert_int_equal(link_data_line_check(&key_b, seen, line, T0, path, sizeof(path)), -EACCES);
	/* stale either way */
	assert_int_equal(link_data_line_check(&key_a, seen, line, T0 + 30001, path, sizeof(path)), -ETIME);
	assert_int_equal(link_data_line_check(&key_a, seen, line, T0 - 30001, path, sizeof(path)), -ETIME);
	/* good, at the edge of the window */
	assert_int_equal(link_data_line_check(&key_a, seen, line, T0 - 29000, path, sizeof(path)), 0);
	assert_string_equal(path, PATH_OK);
	/* replayed 58 s later, still inside its window: refused */
	assert_int_equal(link_data_line_check(&key_a, seen, line, T0 + 29000, path, sizeof(path)), -EALREADY);
	/* a changed path, time or nonce breaks the HMAC */
	snprintf(line2, sizeof(line2), "%s", line);
	memcpy(line2 + 20, "bob__", 5);
	assert_int_equal(link_data_line_check(&key_a, seen, line2, T0, path, sizeof(path)), -EACCES);
	snprintf(line2, sizeof(line2), "%s", line);
	line2[strlen("LABD-DATA1 " PATH_OK " 18000000000")] = '1';
	assert_int_equal(link_data_line_check(&key_a, seen, line2, T0, path, sizeof(path)), -EACCES);
	snprintf(line2, sizeof(line2), "%s", line);
	char *nonce = line2 + strlen("LABD-DATA1 " PATH_OK " 1800000000000 ");
	nonce[0] = nonce[0] == 'a' ? 'b' : 'a';
	assert_int_equal(link_data_line_check(&key_a, seen, line2, T0, path, sizeof(path)), -EACCES);
	link_nonces_free(seen);
}

static void test_data_line_malformed(void **state)
{
	static const char *const bad[] = {
		"",
		"\n",
		"LABD-DATA2 x 1 00000000000000000000000000000000 "
		"0000000000000000000000000000000000000000000000000000000000000000\n",
		"LABD-DATA1 x 1 0000 0000\n",
		"LABD-DATA1  x 1 00000000000000000000000000000000 "
		"0000000000000000000000000000000000000000000000000000000000000000\n",
		"LABD-DATA1 x 01 00000000000000000000000000000000 "
		"0000000000000000000000000000000000000000000000000000000000000000\n",
		"LABD-DATA1 x 1 0000000000000000000000000000000G "
		"0000000000000000000000000000000000000000000000000000000000000000\n",
		"LABD-DATA1 x 1 00000000000000000000000000000000 "
		"0000000000000000000000000000000000000000000000000000000000000000 extra\n",
		"LABD-DATA1 x 1 00000000000000000000000000000000 "
		"0000000000000000000000000000000000000000000000000000000000000000\n\n",
	};
	struct link_nonces *seen = link_nonces_new(4);
	char path[256];
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(link_data_line_check(&key_a, seen, bad[i], 1, path, sizeof(path)), -EPROTO);
	link_nonces_free(seen);
}

/* A full cache refuses rather than forget a nonce early; after a minute it has room. */
static void test_nonce_cache_full(void **state)
{
	struct link_nonces *seen = link_nonces_new(2);
	char line[LINK_DATA_LINE_MAX], path[256];
	(void)state;

	for (int i = 0; i < 2; i++) {
		assert_true(link_data_line_make(&key_a, PATH_OK, T0, line, sizeof(line)) > 0);
		assert_int_equal(link_data_line_check(&key_a, seen, line, T0, path, sizeof(path)), 0);
	}
	assert_true(link_data_line_make(&key_a, PATH_OK, T0, line, sizeof(line)) > 0);
	assert_int_equal(link_data_line_check(&key_a, seen, line, T0 + 1000, path, sizeof(path)), -EBUSY);
	assert_true(link_data_line_make(&key_a, PATH_OK, T0 + 60000, line, sizeof(line)) > 0);
	assert_int_equal(link_data_line_check(&key_a, seen, line, T0 + 60000, path, sizeof(path)), 0);
	link_nonces_free(seen);
}

static void test_data_path(void **state)
{
	(void)state;
	assert_true(link_data_path_ok(PATH_OK));
	assert_true(link_data_path_ok("runtimes/a.b-c_9/run/jupyter.sock"));
	assert_false(link_data_path_ok("runtimes/../run/jupyter.sock"));
	assert_false(link_data_path_ok("runtimes/Alice/run/jupyter.sock"));
	assert_false(link_data_path_ok("runtimes/a/b/run/jupyter.sock"));
	assert_false(link_data_path_ok("runtimes//run/jupyter.sock"));
	assert_false(link_data_path_ok("/runtimes/alice/run/jupyter.sock"));
	assert_false(link_data_path_ok("runtimes/alice/run/other.sock"));
	assert_false(link_data_path_ok("db/labd.db"));
	assert_false(link_data_path_ok("joblogs/1.log@0")); /* never a runtime's endpoint */
}

/* A job log's path: "joblogs/<id>.log@<offset>", id >= 1, offset >= 0, both plain
 * decimals; nothing else names a file there. */
static void test_data_joblog_path(void **state)
{
	int64_t id = -1, off = -1;
	char path[64];
	static const char *const bad[] = {
		"joblogs/0.log@0",	  "joblogs/-1.log@0",	   "joblogs/1.log@-1",
		"joblogs/1.log@",	  "joblogs/1.log",	   "joblogs/.log@0",
		"joblogs/01.log@0",	  "joblogs/1.log@01",	   "joblogs/1.log@1x",
		"joblogs/+1.log@0",	  "joblogs/../1.log@0",	   "joblogs/../../etc/passwd.log@0",
		"joblogs/1/../2.log@0",	  "joblogs//1.log@0",	   "/joblogs/1.log@0",
		"runtimes/1.log@0",	  "joblogs/1.txt@0",	   "joblogs/1.log@0@0",
		"joblogs/9223372036854775808.log@0", "joblogs/1.log@9223372036854775808",
		"joblogs/1.log.hosts@0",
	};
	(void)state;

	assert_true(link_data_joblog_ok("joblogs/1.log@0", &id, &off));
	assert_int_equal(id, 1);
	assert_int_equal(off, 0);
	assert_true(link_data_joblog_ok("joblogs/9223372036854775807.log@123456", &id, &off));
	assert_true(id == INT64_MAX);
	assert_int_equal(off, 123456);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		id = off = -1;
		if (link_data_joblog_ok(bad[i], &id, &off))
			fail_msg("accepted %s", bad[i]);
		assert_int_equal(id, -1);
	}
	assert_int_equal(link_data_joblog_path(42, 7, path, sizeof(path)), 0);
	assert_string_equal(path, "joblogs/42.log@7");
	assert_true(link_data_joblog_ok(path, &id, &off));
	assert_int_equal(link_data_joblog_path(0, 7, path, sizeof(path)), -EINVAL);
	assert_int_equal(link_data_joblog_path(1, -1, path, sizeof(path)), -EINVAL);
	assert_int_equal(link_data_joblog_path(1, 0, path, 8), -ENOSPC);
}

static void test_names(void **state)
{
	(void)state;
	assert_true(link_name_ok("gpu-01"));
	assert_true(link_name_ok("n1.cluster_a"));
	assert_false(link_name_ok(""));
	assert_false(link_name_ok("-n1"));
	assert_false(link_name_ok("n 1"));
	assert_false(link_name_ok("n/1"));
	assert_null(link_ctx_client(&key_a, "bad name"));
}

/* The proxy's side: a tcp: endpoint connects and writes a line the node accepts for
 * the endpoint's path; malformed targets and a missing secret are refused. */
static void test_endpoint_tcp(void **state)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);
	struct link_nonces *seen = link_nonces_new(4);
	char target[128], line[LINK_DATA_LINE_MAX + 1], path[256];
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	(void)state;

	assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(lfd, 4), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sin, &len), 0);
	snprintf(target, sizeof(target), "tcp:127.0.0.1:%u/" PATH_OK, ntohs(sin.sin_port));
	assert_int_equal(endpoint_connect_tcp(target, 1000, false), -ENOKEY);
	endpoint_set_secret(key_a.bytes, key_a.len);
	assert_true(endpoint_is_tcp(target));
	assert_false(endpoint_is_tcp("unix:runtimes/a/run/jupyter.sock"));
	assert_int_equal(endpoint_connect_tcp("tcp:127.0.0.1:1", 1000, false), -EINVAL);
	assert_int_equal(endpoint_connect_tcp("tcp:127.0.0.1/x", 1000, false), -EINVAL);
	assert_int_equal(endpoint_connect_tcp("tcp:node1:7001/x", 1000, false), -EINVAL); /* numeric only */
	int fd = endpoint_connect_tcp(target, 1000, false);
	assert_true(fd >= 0);
	int peer = accept(lfd, NULL, NULL);
	ssize_t n = recv(peer, line, sizeof(line) - 1, 0);
	assert_true(n > 0);
	line[n] = '\0';
	assert_int_equal(link_data_line_check(&key_a, seen, line, clock_wall_ms(), path, sizeof(path)), 0);
	assert_string_equal(path, PATH_OK);
	close(fd);
	close(peer);
	close(lfd);
	link_nonces_free(seen);
}

/* ---- job shells ---- */

/* A pty master as sandbox_shell makes one (the slave opened by nobody). */
static int pty_master(void)
{
	int fd = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(grantpt(fd), 0);
	assert_int_equal(unlockpt(fd), 0);
	return fd;
}

static bool fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static void test_data_shell_path(void **state)
{
	static const char tok[] = "0123456789abcdef0123456789abcdef";
	static const char *const bad[] = {
		"shell/", "shell/0123456789abcdef0123456789abcde",  /* 31 */
		"shell/0123456789abcdef0123456789abcdef0",           /* 33 */
		"shell/0123456789ABCDEF0123456789abcdef",            /* upper case */
		"shell/0123456789abcdef0123456789abcdeg",
		"shells/0123456789abcdef0123456789abcdef", "Shell/0123456789abcdef0123456789abcdef",
		"/shell/0123456789abcdef0123456789abcdef",
		"shell/0123456789abcdef0123456789abcdef@", "shell/0123456789abcdef0123456789abcdef@80",
		"shell/0123456789abcdef0123456789abcdef@80x", "shell/0123456789abcdef0123456789abcdef@x24",
		"shell/0123456789abcdef0123456789abcdef@0x24", "shell/0123456789abcdef0123456789abcdef@80x0",
		"shell/0123456789abcdef0123456789abcdef@1001x24",
		"shell/0123456789abcdef0123456789abcdef@080x24",
		"shell/0123456789abcdef0123456789abcdef@80x24x1",
		"shell/0123456789abcdef0123456789abcdef@-80x24",
		"shell/0123456789abcdef0123456789abcdef/80x24",
		"runtimes/alice/run/jupyter.sock", "joblogs/1.log@0",
	};
	char token[LINK_SHELL_TOKEN_HEX + 1], path[128];
	int cols = -1, rows = -1;
	(void)state;

	assert_true(link_data_shell_ok("shell/0123456789abcdef0123456789abcdef", token, &cols, &rows));
	assert_string_equal(token, tok);
	assert_int_equal(cols, 0);
	assert_int_equal(rows, 0);
	assert_true(link_data_shell_ok("shell/0123456789abcdef0123456789abcdef@1000x1", token, &cols,
				       &rows));
	assert_int_equal(cols, 1000);
	assert_int_equal(rows, 1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (link_data_shell_ok(bad[i], token, &cols, &rows))
			fail_msg("accepted %s", bad[i]);
	/* the other paths' checks do not take a shell's */
	assert_false(link_data_path_ok("shell/0123456789abcdef0123456789abcdef"));
	assert_int_equal(link_data_shell_path(tok, 0, 0, path, sizeof(path)), 0);
	assert_string_equal(path, "shell/0123456789abcdef0123456789abcdef");
	assert_int_equal(link_data_shell_path(tok, 132, 43, path, sizeof(path)), 0);
	assert_string_equal(path, "shell/0123456789abcdef0123456789abcdef@132x43");
	assert_int_equal(link_data_shell_path("../x", 0, 0, path, sizeof(path)), -EINVAL);
	assert_int_equal(link_data_shell_path(tok, 0, 24, path, sizeof(path)), -EINVAL);
	assert_int_equal(link_data_shell_path(tok, 80, 24, path, 20), -ENOSPC);
}

/* Claimed once; a second claim and a wrong token are refused; a terminal resizes
 * from its keeping until its claimer is done. */
static void test_shells_claim_once(void **state)
{
	struct link_shells *t = link_shells_new();
	char token[LINK_SHELL_TOKEN_HEX + 1], other[LINK_SHELL_TOKEN_HEX + 1];
	struct winsize ws;
	int m = pty_master(), p[2];
	(void)state;

	assert_non_null(t);
	assert_int_equal(link_shells_keep(t, m, 1000, token), 0);
	assert_int_equal(strlen(token), LINK_SHELL_TOKEN_HEX);
	assert_int_equal(strspn(token, "0123456789abcdef"), LINK_SHELL_TOKEN_HEX);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(link_shells_keep(t, p[0], 1000, other), 0);
	assert_string_not_equal(token, other); /* random, not a counter */
	assert_int_equal(link_shells_waiting(t), 2);
	/* a resize may come before the claim is read: it holds */
	assert_int_equal(link_shells_resize(t, token, 100, 30), 0);
	assert_int_equal(ioctl(m, TIOCGWINSZ, &ws), 0);
	assert_int_equal(ws.ws_col, 100);
	other[0] = other[0] == 'a' ? 'b' : 'a';
	assert_int_equal(link_shells_claim(t, other, 1001), -ENOENT);
	assert_int_equal(link_shells_claim(t, "short", 1001), -ENOENT);
	assert_int_equal(link_shells_claim(t, token, 1001), m);
	assert_int_equal(link_shells_claim(t, token, 1002), -ENOENT);
	assert_int_equal(link_shells_waiting(t), 1);
	assert_int_equal(link_shells_resize(t, token, 132, 43), 0);
	assert_int_equal(ioctl(m, TIOCGWINSZ, &ws), 0);
	assert_int_equal(ws.ws_col, 132);
	assert_int_equal(ws.ws_row, 43);
	assert_int_equal(link_shells_resize(t, token, 0, 43), -EINVAL);
	link_shells_done(t, token);
	assert_true(fd_open(m)); /* the claimer's to close */
	assert_int_equal(link_shells_resize(t, token, 80, 24), -ENOENT);
	close(m);
	link_shells_free(t); /* closes the pipe's end nobody claimed */
	assert_int_equal(write(p[1], "x", 1), -1);
	assert_int_equal(errno, EPIPE);
	close(p[1]);
}

/* An unclaimed terminal is closed once its claim time passed, not before; a claimed
 * one never is; a full table refuses (and closes) one more. */
static void test_shells_expire(void **state)
{
	struct link_shells *t = link_shells_new();
	char token[LINK_SHELL_TOKEN_HEX + 1], kept[LINK_SHELL_TOKEN_HEX + 1];
	int a[2], b[2], fds[LINK_SHELLS_MAX];
	(void)state;

	assert_int_equal(pipe(a), 0);
	assert_int_equal(pipe(b), 0);
	assert_int_equal(link_shells_keep(t, a[0], 0, token), 0);
	assert_int_equal(link_shells_keep(t, b[0], 0, kept), 0);
	assert_int_equal(link_shells_claim(t, kept, 10), b[0]);
	assert_int_equal(link_shells_expire(t, LINK_SHELL_CLAIM_MS - 1), 0);
	assert_true(fd_open(a[0]));
	assert_int_equal(link_shells_expire(t, LINK_SHELL_CLAIM_MS), 1);
	assert_int_equal(write(a[1], "x", 1), -1); /* its read end is gone */
	assert_int_equal(errno, EPIPE);
	assert_int_equal(link_shells_claim(t, token, LINK_SHELL_CLAIM_MS), -ENOENT);
	assert_true(fd_open(b[0])); /* claimed: the claimer's */
	/* a claim after the time, with no sweep between, is refused too */
	assert_int_equal(pipe(a), 0);
	assert_int_equal(link_shells_keep(t, a[0], 100, token), 0);
	assert_int_equal(link_shells_claim(t, token, 100 + LINK_SHELL_CLAIM_MS), -ENOENT);
	close(a[1]);
	/* full: the one more is closed and refused */
	for (int i = 0; i < LINK_SHELLS_MAX - 1; i++) {
		fds[i] = dup(b[1]);
		assert_int_equal(link_shells_keep(t, fds[i], 200, token), 0);
	}
	fds[LINK_SHELLS_MAX - 1] = dup(b[1]);
	assert_int_equal(link_shells_keep(t, fds[LINK_SHELLS_MAX - 1], 200, token), -EBUSY);
	assert_false(fd_open(fds[LINK_SHELLS_MAX - 1]));
	assert_int_equal(link_shells_waiting(t), LINK_SHELLS_MAX - 1);
	link_shells_done(t, kept);
	close(b[0]);
	link_shells_free(t);
	assert_false(fd_open(fds[0]));
	close(b[1]);
}

/* The relay keeps a pty master under a token and says so in the message; any other
 * descriptor is still dropped and flagged. */
static void test_relay_keeps_a_shell(void **state)
{
	struct head h;
	json_t *hello = hello_of("gpu-07"), *got = NULL;
	const char *text = "{\"type\":\"reply\",\"id\":3,\"ok\":true}";
	struct link_shells *t = link_shells_new();
	int sv[2], p[2], m = pty_master(), fds[2];
	unsigned ptn;
	pthread_t th;
	(void)state;

	head_start(&h, &key_a);
	struct link_conn *node = node_dial(&h, &key_a, "gpu-07", hello);
	head_join(&h);
	assert_int_equal(h.rc, 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	struct relay_arg r = {.c = node, .seq_fd = sv[1], .shells = t};
	assert_int_equal(pthread_create(&th, NULL, relay_thread, &r), 0);
	assert_int_equal(pipe(p), 0);
	fds[0] = m;
	fds[1] = p[0];
	for (int i = 0; i < 2; i++) {
		char cbuf[CMSG_SPACE(sizeof(int))] = {0};
		struct iovec iov = {.iov_base = (void *)text, .iov_len = strlen(text)};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
				    .msg_controllen = sizeof(cbuf)};
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fds[i], sizeof(int));
		assert_int_equal(sendmsg(sv[0], &mh, 0), (ssize_t)strlen(text));
		close(fds[i]);
	}
	assert_int_equal(link_frame_read(h.conn, &got), 0);
	const char *got_token = json_string_value(json_object_get(got, "shell_token"));
	char token[LINK_SHELL_TOKEN_HEX + 1];
	assert_non_null(got_token);
	assert_int_equal(strlen(got_token), LINK_SHELL_TOKEN_HEX);
	memcpy(token, got_token, sizeof(token)); /* got goes before the token's last use */
	assert_null(json_object_get(got, "fd_dropped"));
	int kept = link_shells_claim(t, token, clock_ms());
	assert_true(kept >= 0);
	assert_int_equal(ioctl(kept, TIOCGPTN, &ptn), 0); /* the very master */
	json_decref(got);
	assert_int_equal(link_frame_read(h.conn, &got), 0);
	assert_true(json_is_true(json_object_get(got, "fd_dropped")));
	assert_null(json_object_get(got, "shell_token"));
	json_decref(got);
	assert_int_equal(write(p[1], "x", 1), -1); /* the pipe's end was closed */
	assert_int_equal(errno, EPIPE);
	close(p[1]);
	close(sv[0]);
	pthread_join(th, NULL);
	assert_int_equal(r.rc, 0);
	close(sv[1]);
	link_shells_done(t, token);
	close(kept);
	link_shells_free(t);
	link_conn_free(node);
	head_free(&h);
	json_decref(hello);
}

/* ---- the head stand-in of tests/integration/test_node_link.py ----
 *
 * test_link --head SECRET_FILE: listens on 127.0.0.1 (port printed first as
 * {"port":N}), then for each node in turn: prints its hello (or {"refused":errno}),
 * relays lines of stdin to it as frames and its frames to stdout as lines, and prints
 * {"closed":rc} when the link ends. */

static void *relay_main(void *arg)
{
	struct relay_arg *r = arg;
	r->rc = link_relay(r->c, r->seq_fd, -1, r->shells);
	close(r->seq_fd);
	return NULL;
}

static void say(json_t *v)
{
	char *text = json_dumps(v, JSON_COMPACT);
	printf("%s\n", text);
	fflush(stdout);
	free(text);
	json_decref(v);
}

/* Lines from stdin to seq until the relay's end closes; seq's messages to stdout. */
static void pump(int seq)
{
	static char line[70000], msg[70000];
	size_t have = 0;

	for (;;) {
		struct pollfd p[2] = {{.fd = 0, .events = POLLIN}, {.fd = seq, .events = POLLIN}};
		if (poll(p, 2, -1) < 0)
			return;
		if (p[1].revents) {
			ssize_t n = recv(seq, msg, sizeof(msg) - 1, 0);
			if (n <= 0)
				return;
			msg[n] = '\0';
			printf("%s\n", msg);
			fflush(stdout);
		}
		if (p[0].revents) {
			ssize_t n = read(0, line + have, sizeof(line) - have);
			if (n <= 0)
				_exit(0); /* the test is gone */
			have += (size_t)n;
			char *nl;
			while ((nl = memchr(line, '\n', have))) {
				send(seq, line, (size_t)(nl - line), MSG_NOSIGNAL);
				have -= (size_t)(nl + 1 - line);
				memmove(line, nl + 1, have);
			}
		}
	}
}

static int head_stand_in(const char *secret_file)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);
	struct link_secret secret;
	char err[300];
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (link_secret_read(secret_file, &secret, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	struct link_ctx *ctx = link_ctx_server(&secret);
	if (lfd < 0 || !ctx || bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    listen(lfd, 8) < 0 || getsockname(lfd, (struct sockaddr *)&sin, &len) < 0)
		return 1;
	say(json_pack("{s:i}", "port", ntohs(sin.sin_port)));
	for (;;) {
		json_t *hello = NULL;
		struct link_conn *c = NULL;
		int fd = accept(lfd, NULL, NULL), sv[2];
		if (fd < 0)
			continue;
		int rc = link_accept(ctx, fd, &hello, &c);
		if (rc < 0) {
			say(json_pack("{s:i}", "refused", -rc));
			continue;
		}
		say(hello);
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
			return 1;
		struct relay_arg r = {.c = c, .seq_fd = sv[0]};
		pthread_t t;
		pthread_create(&t, NULL, relay_main, &r);
		pump(sv[1]);
		close(sv[1]);
		pthread_join(t, NULL);
		link_conn_free(c);
		say(json_pack("{s:i}", "closed", r.rc));
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hello_and_frames),
		cmocka_unit_test(test_wrong_key_refused),
		cmocka_unit_test(test_hello_checked),
		cmocka_unit_test(test_bad_frames),
		cmocka_unit_test(test_relay),
		cmocka_unit_test(test_secret_file),
		cmocka_unit_test(test_data_line),
		cmocka_unit_test(test_data_line_malformed),
		cmocka_unit_test(test_nonce_cache_full),
		cmocka_unit_test(test_data_path),
		cmocka_unit_test(test_data_joblog_path),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_endpoint_tcp),
		cmocka_unit_test(test_data_shell_path),
		cmocka_unit_test(test_shells_claim_once),
		cmocka_unit_test(test_shells_expire),
		cmocka_unit_test(test_relay_keeps_a_shell),
	};

	signal(SIGPIPE, SIG_IGN);
	if (argc == 3 && strcmp(argv[1], "--head") == 0)
		return head_stand_in(argv[2]);
	fill_secret(&key_a, 1);
	fill_secret(&key_b, 2);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
