/* link.c - the node link's TLS-PSK stream, its framing and relay; see link.h.
 * The data line and the nonce cache are in link_data.c, the secret and names in
 * link_secret.c. */
#include "proto/link.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "labd/clock.h"
#include "labd/log.h"

#define LINK_SUITE "TLS_AES_128_GCM_SHA256" /* the one suite OpenSSL's PSK callbacks use in 1.3 */
#define HEAD_BYTES 4
#define DATA_ADDR_MAX 128
#define HELLO_GPUS_MAX 64

struct link_ctx {
	SSL_CTX *ssl;
	struct link_secret secret;
	char name[LINK_NAME_MAX + 1]; /* the client's identity; "" on the server */
};

struct link_conn {
	SSL *ssl;
	int fd;
	char name[LINK_NAME_MAX + 1];
	/* the frame being read: its head, then its body */
	unsigned char in[HEAD_BYTES + LINK_FRAME_MAX];
	size_t in_len;
	/* the frame being written */
	unsigned char out[HEAD_BYTES + LINK_FRAME_MAX + 32];
	size_t out_len, out_off;
};

static void log_ssl(const char *what)
{
	unsigned long e = ERR_get_error();
	char buf[256];

	if (e) {
		ERR_error_string_n(e, buf, sizeof(buf));
		log_warn("link: %s: %s", what, buf);
	} else {
		log_warn("link: %s", what);
	}
	ERR_clear_error();
}

/* ---- contexts ---- */

static unsigned client_psk(SSL *ssl, const char *hint, char *identity, unsigned max_identity,
			   unsigned char *psk, unsigned max_psk)
{
	const struct link_ctx *ctx = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));

	(void)hint;
	if (strlen(ctx->name) + 1 > max_identity || ctx->secret.len > max_psk)
		return 0;
	memcpy(identity, ctx->name, strlen(ctx->name) + 1);
	memcpy(psk, ctx->secret.bytes, ctx->secret.len);
	return (unsigned)ctx->secret.len;
}

/* Any well-formed identity gets the one secret: the identity is the node's name,
 * which the hello must repeat; knowing the secret is what admits it. */
static unsigned server_psk(SSL *ssl, const char *identity, unsigned char *psk, unsigned max_psk)
{
	const struct link_ctx *ctx = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
	struct link_conn *c = SSL_get_app_data(ssl);

	if (!identity || !link_name_ok(identity) || ctx->secret.len > max_psk)
		return 0;
	if (c)
		snprintf(c->name, sizeof(c->name), "%s", identity);
	memcpy(psk, ctx->secret.bytes, ctx->secret.len);
	return (unsigned)ctx->secret.len;
}

static struct link_ctx *ctx_new(const struct link_secret *secret, bool server)
{
	struct link_ctx *ctx = calloc(1, sizeof(*ctx));

	if (!ctx)
		return NULL;
	ctx->secret = *secret;
	ctx->ssl = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
	/* TLS 1.3 only: its PSK mode with (EC)DHE gives forward secrecy, and 1.2's PSK
	 * suites would be one more protocol to reason about */
	if (!ctx->ssl || !SSL_CTX_set_min_proto_version(ctx->ssl, TLS1_3_VERSION) ||
	    !SSL_CTX_set_max_proto_version(ctx->ssl, TLS1_3_VERSION) ||
	    !SSL_CTX_set_ciphersuites(ctx->ssl, LINK_SUITE)) {
		log_ssl("cannot make a TLS context");
		link_ctx_free(ctx);
		return NULL;
	}
	SSL_CTX_set_app_data(ctx->ssl, ctx);
	SSL_CTX_set_mode(ctx->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	/* no session tickets: every connection proves the secret again */
	SSL_CTX_set_num_tickets(ctx->ssl, 0);
	SSL_CTX_set_session_cache_mode(ctx->ssl, SSL_SESS_CACHE_OFF);
	if (server)
		SSL_CTX_set_psk_server_callback(ctx->ssl, server_psk);
	else
		SSL_CTX_set_psk_client_callback(ctx->ssl, client_psk);
	return ctx;
}

struct link_ctx *link_ctx_client(const struct link_secret *secret, const char *name)
{
	struct link_ctx *ctx;

	if (!link_name_ok(name)) {
		log_error("link: %s is not a node name", name);
		return NULL;
	}
	ctx = ctx_new(secret, false);
	if (ctx)
		snprintf(ctx->name, sizeof(ctx->name), "%s", name);
	return ctx;
}

struct link_ctx *link_ctx_server(const struct link_secret *secret)
{
	return ctx_new(secret, true);
}

void link_ctx_free(struct link_ctx *ctx)
{
	if (!ctx)
		return;
	SSL_CTX_free(ctx->ssl);
	link_secret_clear(&ctx->secret);
	free(ctx);
}

/* ---- connections ---- */

/* A peer that vanished without a FIN or RST (a node powered off, a partition) must
 * end the link within about a minute, not never: the node then dials again, and the
 * head lets the node's entry go. Keepalive probes after 30 s idle, 10 s apart, 3 lost;
 * data unacknowledged for 60 s ends it too. */
static void set_liveness(int fd)
{
	int on = 1, idle_s = 30, interval_s = 10, count = 3, unacked_ms = 60000;

	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof(interval_s));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &unacked_ms, sizeof(unacked_ms));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on)); /* small frames, answered at once */
}

static struct link_conn *conn_new(struct link_ctx *ctx, int fd)
{
	struct link_conn *c = calloc(1, sizeof(*c));

	if (!c) {
		close(fd);
		return NULL;
	}
	c->fd = fd;
	c->ssl = SSL_new(ctx->ssl);
	if (!c->ssl || !SSL_set_fd(c->ssl, fd)) {
		log_ssl("cannot make a TLS connection");
		link_conn_free(c);
		return NULL;
	}
	SSL_set_app_data(c->ssl, c);
	set_liveness(fd);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return c;
}

void link_conn_free(struct link_conn *c)
{
	if (!c)
		return;
	if (c->ssl) {
		if (SSL_is_init_finished(c->ssl))
			SSL_shutdown(c->ssl); /* best effort: the close_notify, never waited for */
		SSL_free(c->ssl);
	}
	if (c->fd >= 0)
		close(c->fd);
	ERR_clear_error();
	free(c);
}

const char *link_conn_name(const struct link_conn *c)
{
	return c->name;
}

int link_conn_fd(const struct link_conn *c)
{
	return c->fd;
}

/* Waits for fd to become ready for what TLS asked (err: SSL_get_error's answer)
 * until deadline_ms (-1: none). 0, or -ETIMEDOUT, or the negative errno of the I/O
 * error err stands for. */
static int wait_tls(struct link_conn *c, int err, long long deadline_ms)
{
	struct pollfd p = {.fd = c->fd};
	int timeout_ms = -1;

	if (err == SSL_ERROR_WANT_READ)
		p.events = POLLIN;
	else if (err == SSL_ERROR_WANT_WRITE)
		p.events = POLLOUT;
	else if (err == SSL_ERROR_ZERO_RETURN)
		return -ECONNRESET;
	else if (err == SSL_ERROR_SYSCALL)
		return errno ? -errno : -ECONNRESET;
	else
		return -EPROTO;
	if (deadline_ms >= 0) {
		long long left = deadline_ms - clock_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		timeout_ms = (int)left;
	}
	int n = poll(&p, 1, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	return n == 0 ? -ETIMEDOUT : 0;
}

/* The handshake, until deadline_ms. A refusal by the TLS layer (the binder of a
 * wrong key, an identity the server does not take) is -EACCES. */
static int handshake(struct link_conn *c, bool server, long long deadline_ms)
{
	for (;;) {
		ERR_clear_error();
		int r = server ? SSL_accept(c->ssl) : SSL_connect(c->ssl);
		if (r == 1)
			return 0;
		int err = SSL_get_error(c->ssl, r);
		if (err == SSL_ERROR_SSL) {
			log_ssl(server ? "handshake refused" : "the head refused the handshake");
			return -EACCES;
		}
		if (err == SSL_ERROR_SYSCALL && errno == 0)
			return -EACCES; /* the peer closed during the handshake: it refused us */
		int rc = wait_tls(c, err, deadline_ms);
		if (rc < 0)
			return rc;
	}
}

/* Connects fd to host:port within deadline_ms; the socket or a negative errno. */
static int tcp_connect(const char *hostport, long long deadline_ms)
{
	char host[256], *port;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	int fd = -1, rc = -EHOSTUNREACH;

	if (snprintf(host, sizeof(host), "%s", hostport) >= (int)sizeof(host))
		return -EINVAL;
	port = strrchr(host, ':');
	if (!port || port == host)
		return -EINVAL;
	*port++ = '\0';
	if (host[0] == '[' && port[-2] == ']') { /* [v6]:port */
		port[-2] = '\0';
		memmove(host, host + 1, strlen(host));
	}
	if (getaddrinfo(host, port, &hints, &res) != 0 || !res)
		return -EHOSTUNREACH;
	for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) < 0 && errno != EINPROGRESS) {
			rc = -errno;
			close(fd);
			fd = -1;
			continue;
		}
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		long long left = deadline_ms - clock_ms();
		int soerr = 0;
		socklen_t len = sizeof(soerr);
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			soerr = ETIMEDOUT;
		else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
			soerr = errno;
		if (soerr) {
			rc = -soerr;
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	return fd >= 0 ? fd : rc;
}

int link_dial(struct link_ctx *ctx, const char *hostport, struct link_conn **out)
{
	long long deadline_ms = clock_ms() + LINK_HANDSHAKE_MS;
	struct link_conn *c;
	int fd, rc;

	*out = NULL;
	if ((fd = tcp_connect(hostport, deadline_ms)) < 0)
		return fd;
	if (!(c = conn_new(ctx, fd)))
		return -ENOMEM;
	snprintf(c->name, sizeof(c->name), "%s", ctx->name);
	if ((rc = handshake(c, false, deadline_ms)) < 0) {
		link_conn_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* ---- framing ---- */

static void put_head(unsigned char *out, size_t len);

/* Puts msg as one frame into c's out buffer. 0 or -EMSGSIZE / -ENOMEM. */
static int frame_encode(struct link_conn *c, json_t *msg)
{
	char *text = json_dumps(msg, JSON_COMPACT);
	size_t len;

	if (!text)
		return -ENOMEM;
	len = strlen(text);
	if (len == 0 || len > LINK_FRAME_MAX) {
		free(text);
		return -EMSGSIZE;
	}
	put_head(c->out, len);
	memcpy(c->out + HEAD_BYTES, text, len);
	free(text);
	c->out_len = HEAD_BYTES + len;
	c->out_off = 0;
	return 0;
}

/* Writes what is left of the out buffer without waiting. 0 when all is written,
 * 1 when TLS waits (*want: SSL_ERROR_WANT_*), or a negative errno. */
static int flush_some(struct link_conn *c, int *want)
{
	while (c->out_off < c->out_len) {
		ERR_clear_error();
		int n = SSL_write(c->ssl, c->out + c->out_off, (int)(c->out_len - c->out_off));
		if (n > 0) {
			c->out_off += (size_t)n;
			continue;
		}
		int err = SSL_get_error(c->ssl, n);
		if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
			*want = err;
			return 1;
		}
		return err == SSL_ERROR_SYSCALL && errno ? -errno : -ECONNRESET;
	}
	c->out_len = c->out_off = 0;
	return 0;
}

/* The length a frame's head announces, or -EPROTO when it is 0 or over the bound. */
static long frame_length(const unsigned char *head)
{
	uint32_t len = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 |
		       (uint32_t)head[2] << 8 | head[3];

	return len == 0 || len > LINK_FRAME_MAX ? -EPROTO : (long)len;
}

/* Reads into the in buffer without waiting, until one frame is whole. 0 with the
 * frame whole (its body at in + HEAD_BYTES, *body_len), 1 when TLS waits (*want),
 * 2 on orderly close, or a negative errno (-EPROTO for a bad length). */
static int read_some(struct link_conn *c, size_t *body_len, int *want)
{
	for (;;) {
		size_t need = HEAD_BYTES;
		if (c->in_len >= HEAD_BYTES) {
			long len = frame_length(c->in);
			if (len < 0)
				return (int)len;
			need = HEAD_BYTES + (size_t)len;
			if (c->in_len == need) {
				*body_len = (size_t)len;
				return 0;
			}
		}
		ERR_clear_error();
		int n = SSL_read(c->ssl, c->in + c->in_len, (int)(need - c->in_len));
		if (n > 0) {
			c->in_len += (size_t)n;
			continue;
		}
		int err = SSL_get_error(c->ssl, n);
		if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
			*want = err;
			return 1;
		}
		if (err == SSL_ERROR_ZERO_RETURN)
			return c->in_len == 0 ? 2 : -EPROTO; /* closed inside a frame */
		if (err == SSL_ERROR_SYSCALL)
			return errno ? -errno : -ECONNRESET;
		log_ssl("read");
		return -EPROTO;
	}
}

/* A whole frame's body as a JSON object; -EPROTO when it is not one. */
static int frame_decode(const unsigned char *body, size_t len, json_t **out)
{
	json_error_t jerr;
	json_t *v = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &jerr);

	if (!v || !json_is_object(v)) {
		json_decref(v);
		return -EPROTO;
	}
	*out = v;
	return 0;
}

static int write_until(struct link_conn *c, json_t *msg, long long deadline_ms)
{
	int rc, want = 0;

	if (c->out_len > c->out_off)
		return -EBUSY; /* a relay's frame is half-written */
	if ((rc = frame_encode(c, msg)) < 0)
		return rc;
	while ((rc = flush_some(c, &want)) == 1)
		if ((rc = wait_tls(c, want, deadline_ms)) < 0)
			return rc;
	return rc;
}

static int read_until(struct link_conn *c, json_t **out, long long deadline_ms)
{
	size_t len;
	int rc, want = 0;

	*out = NULL;
	while ((rc = read_some(c, &len, &want)) == 1)
		if ((rc = wait_tls(c, want, deadline_ms)) < 0)
			return rc;
	if (rc == 2)
		return 1;
	if (rc < 0)
		return rc;
	c->in_len = 0;
	return frame_decode(c->in + HEAD_BYTES, len, out);
}

int link_frame_write(struct link_conn *c, json_t *msg)
{
	return write_until(c, msg, -1);
}

int link_frame_read(struct link_conn *c, json_t **out)
{
	return read_until(c, out, -1);
}

int link_write_bytes(struct link_conn *c, const void *bytes, size_t len)
{
	int rc, want = 0;

	if (c->out_len > c->out_off || len > sizeof(c->out))
		return -EBUSY;
	memcpy(c->out, bytes, len);
	c->out_len = len;
	c->out_off = 0;
	while ((rc = flush_some(c, &want)) == 1)
		if ((rc = wait_tls(c, want, -1)) < 0)
			return rc;
	return rc;
}

/* ---- the head's side ---- */

int link_accept(struct link_ctx *ctx, int fd, json_t **hello, struct link_conn **out)
{
	long long deadline_ms = clock_ms() + LINK_HANDSHAKE_MS;
	struct link_conn *c;
	char err[160];
	int rc;

	*hello = NULL;
	*out = NULL;
	if (!(c = conn_new(ctx, fd)))
		return -ENOMEM;
	if ((rc = handshake(c, true, deadline_ms)) < 0)
		goto out;
	if ((rc = read_until(c, hello, deadline_ms)) != 0) {
		rc = rc == 1 ? -ECONNRESET : rc;
		goto out;
	}
	if (link_hello_check(*hello, c->name, err, sizeof(err)) < 0) {
		log_warn("link: node %s: bad hello: %s", c->name, err);
		rc = -EPROTO;
		goto out;
	}
	*out = c;
	return 0;
out:
	json_decref(*hello);
	*hello = NULL;
	link_conn_free(c);
	return rc;
}

static bool is_host_port(const char *s)
{
	const char *colon = strrchr(s, ':');
	char *end;

	if (!colon || colon == s || strlen(s) > DATA_ADDR_MAX)
		return false;
	for (const char *p = s; p < colon; p++)
		if (*p <= ' ' || *p == '/' || *p > '~')
			return false;
	long port = strtol(colon + 1, &end, 10);
	return colon[1] && !*end && port >= 1 && port <= 65535;
}

static bool int_in(json_t *v, long long lo, long long hi)
{
	return json_is_integer(v) && json_integer_value(v) >= lo && json_integer_value(v) <= hi;
}

int link_hello_check(json_t *hello, const char *expect_name, char *err, size_t errlen)
{
	static const char *const known[] = {"type", "name", "data", "gpus", "cpus",
					    "memory_bytes", "version"};
	const char *key, *name = json_string_value(json_object_get(hello, "name"));
	const char *data = json_string_value(json_object_get(hello, "data"));
	json_t *gpus = json_object_get(hello, "gpus"), *v;
	size_t i;

#define BAD(...) return snprintf(err, errlen, __VA_ARGS__), -EPROTO
	if (!json_is_object(hello))
		BAD("not an object");
	json_object_foreach (hello, key, v) {
		for (i = 0; i < sizeof(known) / sizeof(known[0]) && strcmp(known[i], key); i++)
			;
		if (i == sizeof(known) / sizeof(known[0]))
			BAD("unknown field %.40s", key);
	}
	if (!json_is_string(json_object_get(hello, "type")) ||
	    strcmp(json_string_value(json_object_get(hello, "type")), "node_hello") != 0)
		BAD("type is not node_hello");
	if (!name || !link_name_ok(name))
		BAD("name is not a node name");
	if (expect_name && strcmp(name, expect_name) != 0)
		BAD("name %s is not the TLS identity %s", name, expect_name);
	if (!data || !is_host_port(data))
		BAD("data is not HOST:PORT");
	if (!json_is_array(gpus) || json_array_size(gpus) > HELLO_GPUS_MAX)
		BAD("gpus is not an array of at most %d device minors", HELLO_GPUS_MAX);
	json_array_foreach (gpus, i, v)
		if (!int_in(v, 0, 1 << 20))
			BAD("gpus[%zu] is not a device minor", i);
	if (!int_in(json_object_get(hello, "cpus"), 1, 1 << 20))
		BAD("cpus is not a count >= 1");
	if (!int_in(json_object_get(hello, "memory_bytes"), 1, 1LL << 60))
		BAD("memory_bytes is not a size >= 1");
	v = json_object_get(hello, "version");
	if (v && (!json_is_string(v) || json_string_length(v) > 32))
		BAD("version is not a short string");
#undef BAD
	return 0;
}

/* ---- the relay ---- */

struct link_relay_state {
	struct link_conn *c;
	int seq_fd, stop_fd;
	struct link_shells *shells; /* where a job shell's terminal waits; NULL: closed */
	/* a frame read from TLS, not yet sent on seq_fd (its body in c->in) */
	size_t pending_len;
	bool pending;
	int tls_read_want, tls_write_want; /* 0: not waiting */
};

/* Puts the 4-byte big-endian head of a body of len bytes at out. */
static void put_head(unsigned char *out, size_t len)
{
	out[0] = (unsigned char)(len >> 24);
	out[1] = (unsigned char)(len >> 16);
	out[2] = (unsigned char)(len >> 8);
	out[3] = (unsigned char)len;
}

/* A message that came with a descriptor (its body already in the out buffer): the
 * descriptor cannot cross a network. A pty master (job_shell's: TIOCGPTN answers only
 * on a master) is kept in shells for the head to claim through the data port; any
 * other is closed. The message says which. */
static int drop_fd(struct link_relay_state *r, size_t len, int fd)
{
	struct link_conn *c = r->c;
	char token[LINK_SHELL_TOKEN_HEX + 1];
	unsigned pty_number;
	json_t *msg;
	int rc;

	if ((rc = frame_decode(c->out + HEAD_BYTES, len, &msg)) < 0) {
		close(fd);
		return rc;
	}
	bool pty = r->shells && ioctl(fd, TIOCGPTN, &pty_number) == 0;
	/* link_shells_keep takes the fd, closed when it has no room */
	if (pty && link_shells_keep(r->shells, fd, clock_ms(), token) == 0) {
		json_object_set_new(msg, "shell_token", json_string(token));
	} else {
		if (!pty)
			close(fd);
		json_object_set_new(msg, "fd_dropped", json_true());
	}
	rc = frame_encode(c, msg);
	json_decref(msg);
	return rc;
}

/* One message from seq_fd into the out buffer (received in place, behind the room
 * for its head). 0 taken, 1 nothing there, 2 EOF, or a negative errno. */
static int take_seq(struct link_relay_state *r)
{
	struct link_conn *c = r->c;
	char cbuf[CMSG_SPACE(sizeof(int) * 4)];
	struct iovec iov = {.iov_base = c->out + HEAD_BYTES, .iov_len = LINK_FRAME_MAX};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf)};
	int fd = -1;

	ssize_t n = recvmsg(r->seq_fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 1
		       : errno == ECONNRESET			? 2
								: -errno;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int fds[4];
		memcpy(fds, CMSG_DATA(cm), nfd * sizeof(int));
		for (size_t i = 0; i < nfd; i++) {
			if (fd < 0)
				fd = fds[i];
			else
				close(fds[i]);
		}
	}
	if (n == 0 && fd < 0)
		return 2;
	if ((mh.msg_flags & MSG_TRUNC) || n == 0) {
		if (fd >= 0)
			close(fd);
		return -EMSGSIZE;
	}
	if (fd >= 0)
		return drop_fd(r, (size_t)n, fd);
	put_head(c->out, (size_t)n);
	c->out_len = HEAD_BYTES + (size_t)n;
	c->out_off = 0;
	return 0;
}

/* Sends the pending frame on seq_fd. 0 sent, 1 would block, or a negative errno. */
static int give_seq(struct link_relay_state *r)
{
	ssize_t n = send(r->seq_fd, r->c->in + HEAD_BYTES, r->pending_len, MSG_DONTWAIT | MSG_NOSIGNAL);

	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK	  ? 1
		       : errno == EPIPE || errno == ECONNRESET ? 2
								 : -errno;
	r->pending = false;
	r->c->in_len = 0;
	return 0;
}

/* Does all that can be done without waiting. 0 to wait, 2 when a side closed, or a
 * negative errno. */
static int relay_step(struct link_relay_state *r)
{
	bool progress = true;
	int rc;

	while (progress) {
		progress = false;
		if (r->pending) {
			if ((rc = give_seq(r)) < 0 || rc == 2)
				return rc;
			progress = rc == 0;
		}
		r->tls_read_want = 0;
		if (!r->pending) {
			rc = read_some(r->c, &r->pending_len, &r->tls_read_want);
			if (rc < 0 || rc == 2)
				return rc;
			if (rc == 0) {
				r->pending = true;
				progress = true;
			}
		}
		if (r->c->out_len == 0) {
			if ((rc = take_seq(r)) < 0 || rc == 2)
				return rc;
			progress |= rc == 0;
		}
		r->tls_write_want = 0;
		if (r->c->out_len > 0) {
			if ((rc = flush_some(r->c, &r->tls_write_want)) < 0)
				return rc;
			progress |= rc == 0;
		}
	}
	return 0;
}

int link_relay(struct link_conn *c, int seq_fd, int stop_fd, struct link_shells *shells)
{
	struct link_relay_state r = {.c = c, .seq_fd = seq_fd, .stop_fd = stop_fd, .shells = shells};
	int rc;

	for (;;) {
		if ((rc = relay_step(&r)) != 0)
			return rc == 2 ? 0 : rc;
		short tls_events = 0;
		int want[2] = {r.tls_read_want, r.tls_write_want};
		for (int i = 0; i < 2; i++)
			tls_events |= want[i] == SSL_ERROR_WANT_READ    ? POLLIN
				      : want[i] == SSL_ERROR_WANT_WRITE ? POLLOUT
									: 0;
		short seq_events = (short)((r.pending ? POLLOUT : 0) | (c->out_len == 0 ? POLLIN : 0));
		/* an fd asked for nothing is left out (-1), or its hang-up would spin */
		struct pollfd p[3] = {
			{.fd = tls_events ? c->fd : -1, .events = tls_events},
			{.fd = seq_events ? seq_fd : -1, .events = seq_events},
			{.fd = stop_fd, .events = POLLIN},
		};
		if (poll(p, 3, -1) < 0 && errno != EINTR)
			return -errno;
		if (stop_fd >= 0 && p[2].revents)
			return 0;
	}
}
