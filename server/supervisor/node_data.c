/* node_data.c - the data port; see node_data.h.
 *
 * A thread per connection, blocking I/O with poll: at most data_max_connections of
 * them, each with a small stack, and the relay copies through one 64 KiB buffer each way
 * (128 KiB a connection: 128 MiB at the default bound of 1024). Measured with
 * bench/node-link.py over loopback: 16 KiB buffers gave 349 MiB/s for one stream, 64 KiB
 * 839 MiB/s (the Unix socket alone: 2.5-3.3 GiB/s); more than a cluster link carries. */
#include "supervisor/node_data.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "labd/clock.h"
#include "labd/log.h"
#include "proto/link.h"

#define NONCES_MAX 65536 /* lines a minute; more are refused (-EBUSY) */
#define RELAY_BUF 65536
#define THREAD_STACK (256 * 1024)
#define REFUSAL_LOG_MS 60000
#define EXPIRE_MS 500 /* how often unclaimed terminals are looked at */

static struct {
	int listen_fd;
	unsigned max_connections;
	atomic_uint live;
	struct link_secret secret;
	pthread_mutex_t lock; /* the nonces and the refusal log */
	struct link_nonces *nonces;
	struct link_shells *shells; /* job shells' terminals the link keeps for the head */
	long long refusal_logged_ms;
	unsigned refusals_quiet;
} data = {.lock = PTHREAD_MUTEX_INITIALIZER, .refusal_logged_ms = -REFUSAL_LOG_MS};

/* A refusal, logged once a minute with the count of those not logged. */
static void refused(const char *why, const char *detail)
{
	long long now = clock_ms();

	pthread_mutex_lock(&data.lock);
	if (now - data.refusal_logged_ms >= REFUSAL_LOG_MS) {
		log_warn("data port: refused a connection: %s%s%s (and %u more since the last "
			 "such line)", why, detail[0] ? ": " : "", detail, data.refusals_quiet);
		data.refusal_logged_ms = now;
		data.refusals_quiet = 0;
	} else {
		data.refusals_quiet++;
	}
	pthread_mutex_unlock(&data.lock);
}

/* Reads the line up to and with its '\n', never a byte past it (those are the
 * HTTP stream's). 0, or -1 on timeout, EOF, or a line over the bound. */
static int read_line(int fd, char *line, size_t len)
{
	long long deadline_ms = clock_ms() + NODE_DATA_LINE_MS;
	size_t have = 0;

	while (have + 1 < len) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		long long left = deadline_ms - clock_ms();
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return -1;
		ssize_t n = recv(fd, line + have, len - 1 - have, MSG_PEEK);
		if (n <= 0)
			return -1;
		char *nl = memchr(line + have, '\n', (size_t)n);
		size_t take = nl ? (size_t)(nl - (line + have)) + 1 : (size_t)n;
		if (recv(fd, line + have, take, 0) != (ssize_t)take)
			return -1;
		have += take;
		if (nl) {
			line[have] = '\0';
			return 0;
		}
	}
	return -1;
}

/* Connects to path (runtimes/<user>/run/jupyter.sock, relative to the state dir)
 * without following a link the user could plant: the run dir is the sandbox's own
 * tmpfs, owned by its uid; the socket must be that uid's, reached through its opened
 * inode, and the peer must be that uid too. The connected fd, or -1. */
static int connect_runtime(const char *path)
{
	char dir[256], via[64];
	const char *slash = strrchr(path, '/');
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat dst, sst;
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	int dfd = -1, sfd = -1, fd = -1;

	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if ((dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    fstat(dfd, &dst) < 0 || dst.st_uid == 0 || dst.st_uid == geteuid())
		goto fail;
	if ((sfd = openat(dfd, slash + 1, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    fstat(sfd, &sst) < 0 || !S_ISSOCK(sst.st_mode) || sst.st_uid != dst.st_uid)
		goto fail;
	snprintf(via, sizeof(via), "/proc/self/fd/%d", sfd);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", via);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 || cred.uid != dst.st_uid)
		goto fail;
	close(sfd);
	close(dfd);
	return fd;
fail:
	if (fd >= 0)
		close(fd);
	if (sfd >= 0)
		close(sfd);
	if (dfd >= 0)
		close(dfd);
	return -1;
}

/* Writes all of buf to fd; 0, or -1 (the head went, or stopped reading). */
static int send_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t w = send(fd, buf, len, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Sends job_id's log (joblogs/<id>.log under the state dir, this process's cwd) from
 * offset to its end as it is now, then returns (the caller closes). The log is the
 * node supervisor's (root:labd 0640 in its root:labd 0750 folder): opened without
 * following a link, and only a regular file is read. A missing log, or an offset at
 * or past its end, sends nothing; the file's own cap bounds what is sent. */
static void send_joblog(int tcp, const char *path, int64_t job_id, int64_t offset)
{
	char name[32], *buf = NULL;
	struct stat st;
	int dfd, fd = -1;

	snprintf(name, sizeof(name), "%lld.log", (long long)job_id);
	if ((dfd = open("joblogs", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0)
		fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			refused("cannot open the job log", path);
	} else if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		refused("not a regular file", path);
	} else if ((buf = malloc(RELAY_BUF))) {
		/* a head that stopped reading must not hold the thread for ever */
		setsockopt(tcp, SOL_SOCKET, SO_SNDTIMEO,
			   &(struct timeval){.tv_sec = NODE_DATA_SEND_MS / 1000}, sizeof(struct timeval));
		for (off_t off = offset; off < st.st_size;) {
			size_t want = st.st_size - off < RELAY_BUF ? (size_t)(st.st_size - off) : RELAY_BUF;
			ssize_t n = pread(fd, buf, want, off);
			if (n <= 0 || send_all(tcp, buf, (size_t)n) < 0)
				break;
			off += n;
		}
	}
	free(buf);
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
}

/* Copies between the head's connection and a job shell's terminal, non-blocking, one
 * chunk in flight each way (a shell that floods waits for the head; keystrokes wait
 * for the shell), until either side ends: then both do (the master's close hangs the
 * shell up). */
static void splice_shell(int tcp, int pty)
{
	struct {
		int from, to;
		char buf[4096];
		size_t off, len;
	} d[2] = {{.from = tcp, .to = pty}, {.from = pty, .to = tcp}};

	fcntl(tcp, F_SETFL, fcntl(tcp, F_GETFL) | O_NONBLOCK);
	fcntl(pty, F_SETFL, fcntl(pty, F_GETFL) | O_NONBLOCK);
	for (;;) {
		struct pollfd p[2] = {{.fd = tcp}, {.fd = pty}};
		for (int i = 0; i < 2; i++) /* p[0] is tcp, d[0] reads it */
			if (d[i].len)
				p[1 - i].events |= POLLOUT;
			else
				p[i].events |= POLLIN;
		for (int i = 0; i < 2; i++) /* a side asked for nothing must not wake us */
			if (!p[i].events)
				p[i].fd = -1;
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		for (int i = 0; i < 2; i++) {
			ssize_t n;
			if (!d[i].len && p[i].revents) {
				n = read(d[i].from, d[i].buf, sizeof(d[i].buf));
				if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
					return; /* EOF, or EIO: the shell and all its children left */
				d[i].len = n > 0 ? (size_t)n : 0;
				d[i].off = 0;
			} else if (d[i].len && p[1 - i].revents) {
				n = d[i].to == tcp ? send(tcp, d[i].buf + d[i].off, d[i].len - d[i].off,
							  MSG_NOSIGNAL)
						   : write(pty, d[i].buf + d[i].off, d[i].len - d[i].off);
				if (n < 0 && errno != EAGAIN && errno != EINTR)
					return;
				if (n > 0 && (d[i].off += (size_t)n) == d[i].len)
					d[i].len = 0;
			}
		}
	}
}

/* A job shell's path: the claim of a kept terminal (spliced with the connection until
 * either ends), or a resize of one (then the close says it is done). The token is not
 * logged. */
static void serve_shell(int tcp, const char *token, int cols, int rows)
{
	int pty;

	if (cols) {
		if (link_shells_resize(data.shells, token, cols, rows) < 0)
			refused("no terminal to resize under that token", "");
		return;
	}
	if ((pty = link_shells_claim(data.shells, token, clock_ms())) < 0) {
		refused("no terminal waits under that token (claimed already, or expired)", "");
		return;
	}
	log_info("data port: a job shell's terminal was claimed");
	setsockopt(tcp, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int)); /* echo as typed */
	splice_shell(tcp, pty);
	link_shells_done(data.shells, token);
	close(pty); /* the shell's session gets SIGHUP */
}

/* Checks the line and serves a job log's or a job shell's path at once; 0 with the
 * runtime's socket connected into *out (-1 after the others), or -1 (refused and
 * logged). */
static int admit(int tcp, int *out)
{
	char line[LINK_DATA_LINE_MAX + 1], path[256], token[LINK_SHELL_TOKEN_HEX + 1];
	int64_t job_id, offset;
	int rc, cols, rows;

	*out = -1;
	if (read_line(tcp, line, sizeof(line)) < 0) {
		refused("no data line", "");
		return -1;
	}
	pthread_mutex_lock(&data.lock);
	rc = link_data_line_check(&data.secret, data.nonces, line, clock_wall_ms(), path, sizeof(path));
	pthread_mutex_unlock(&data.lock);
	if (rc < 0) {
		refused(rc == -EACCES	  ? "bad HMAC (another secret?)"
			: rc == -ETIME	  ? "stale line (clocks more than 30 s apart?)"
			: rc == -EALREADY ? "replayed line"
			: rc == -EBUSY	  ? "too many lines this minute"
					  : "malformed line",
			"");
		return -1;
	}
	if (link_data_joblog_ok(path, &job_id, &offset)) {
		send_joblog(tcp, path, job_id, offset);
		return 0;
	}
	if (link_data_shell_ok(path, token, &cols, &rows)) {
		serve_shell(tcp, token, cols, rows);
		return 0;
	}
	if (!link_data_path_ok(path)) {
		refused("neither a runtime's socket, a job log nor a job shell", path);
		return -1;
	}
	if ((*out = connect_runtime(path)) < 0) {
		refused("no runtime answers at", path);
		return -1;
	}
	return 0;
}

/* Copies both ways until both directions ended; an EOF one way is passed on as a
 * half-close, an error ends both. */
static void relay(int a, int b)
{
	char *buf = malloc(2 * RELAY_BUF);
	int fds[2] = {a, b};
	bool open_in[2] = {true, true};

	if (!buf)
		return;
	while (open_in[0] || open_in[1]) {
		struct pollfd p[2] = {{.fd = open_in[0] ? a : -1, .events = POLLIN},
				      {.fd = open_in[1] ? b : -1, .events = POLLIN}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < 2; i++) {
			if (!open_in[i] || !p[i].revents)
				continue;
			char *chunk = buf + i * RELAY_BUF;
			ssize_t n = read(fds[i], chunk, RELAY_BUF);
			if (n <= 0) {
				if (n < 0 && errno == EINTR)
					continue;
				open_in[i] = false;
				shutdown(fds[1 - i], SHUT_WR);
				if (n < 0)
					goto out;
				continue;
			}
			if (send_all(fds[1 - i], chunk, (size_t)n) < 0)
				goto out;
		}
	}
out:
	free(buf);
}

static void *serve_one(void *arg)
{
	int tcp = (int)(intptr_t)arg, unix_fd = -1;

	if (admit(tcp, &unix_fd) == 0 && unix_fd >= 0) {
		relay(tcp, unix_fd);
		close(unix_fd);
	}
	close(tcp);
	atomic_fetch_sub(&data.live, 1);
	return NULL;
}

static void *accept_loop(void *arg)
{
	pthread_attr_t attr;

	(void)arg;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	for (;;) {
		struct pollfd lp = {.fd = data.listen_fd, .events = POLLIN};
		pthread_t t;
		/* between connections, the terminals nobody claimed in time are closed */
		link_shells_expire(data.shells, clock_ms());
		if (poll(&lp, 1, EXPIRE_MS) <= 0)
			continue;
		/* blocking: an accepted socket does not inherit the listener's O_NONBLOCK */
		int fd = accept4(data.listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN)
				usleep(100 * 1000); /* out of fds: a moment, then again */
			continue;
		}
		if (atomic_fetch_add(&data.live, 1) >= data.max_connections) {
			atomic_fetch_sub(&data.live, 1);
			refused("too many connections", "");
			close(fd);
			continue;
		}
		/* a head that vanished without a FIN must not hold a slot for ever */
		setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &(int){1}, sizeof(int));
		if (pthread_create(&t, &attr, serve_one, (void *)(intptr_t)fd) != 0) {
			atomic_fetch_sub(&data.live, 1);
			close(fd);
		}
	}
	return NULL;
}

/* Two descriptors a connection (its TCP socket and the runtime's) beside the link's
 * own: the soft limit (often 1024) is raised to the hard one, and the bound is said
 * when even that is too low. */
static void raise_nofile(unsigned max_connections)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < 2ull * max_connections + 64)
		log_warn("data port: the open-file limit %llu is too low for [node] "
			 "data_max_connections = %u (each takes two)",
			 (unsigned long long)rl.rlim_cur, max_connections);
}

int node_data_start(int listen_fd, const struct link_secret *secret, unsigned max_connections,
		    struct link_shells *shells)
{
	pthread_t t;

	data.listen_fd = listen_fd;
	data.shells = shells;
	data.max_connections = max_connections ? max_connections : 1;
	data.secret = *secret;
	raise_nofile(data.max_connections);
	if (!(data.nonces = link_nonces_new(NONCES_MAX)))
		return log_error("data port: out of memory");
	/* polled with a timeout on this thread (the expiry of unclaimed terminals) */
	fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK);
	if (pthread_create(&t, NULL, accept_loop, NULL) != 0)
		return log_error("data port: cannot start its thread");
	pthread_detach(t);
	return 0;
}
