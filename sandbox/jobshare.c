/* jobshare.c - the folders of a job on several hosts sent from algo-1 to the
 * others; see jobshare.h. */
#include "sandbox/jobshare.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IO_TIMEOUT_S 60 /* a peer that stops reading or sending for this long is gone */
#define HEAD_MAX 96

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

int jobshare_path_ok(const char *path)
{
	size_t n = strlen(path);

	if (n == 0 || n > JOBSHARE_PATH_MAX || path[0] == '/')
		return 0;
	for (const char *p = path; *p;) {
		size_t k = strcspn(p, "/");
		if (k == 0 || (k == 1 && p[0] == '.') || (k == 2 && p[0] == '.' && p[1] == '.'))
			return 0;
		p += k;
		if (*p == '/' && !*++p)
			return 0; /* a trailing '/' is an empty part */
	}
	return 1;
}

static int ms_left(const struct timespec *deadline)
{
	struct timespec now;
	long long ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (deadline->tv_sec - now.tv_sec) * 1000LL + (deadline->tv_nsec - now.tv_nsec) / 1000000;
	return ms < 0 ? 0 : ms > 3600000 ? 3600000 : (int)ms;
}

static void deadline_in(struct timespec *d, int s)
{
	clock_gettime(CLOCK_MONOTONIC, d);
	d->tv_sec += s;
}

static void io_timeouts(int fd)
{
	struct timeval tv = {IO_TIMEOUT_S, 0};

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)); /* bounds connect() too */
}

/* addr (IPv4 or IPv6) and port into ss; its length, or 0 when addr is no address. */
static socklen_t address(const char *addr, int port, struct sockaddr_storage *ss)
{
	struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, addr, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)port);
		return sizeof(*v4);
	}
	if (inet_pton(AF_INET6, addr, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)port);
		return sizeof(*v6);
	}
	return 0;
}

/* ---- sending ---- */

struct sender {
	int fd;
	struct jobshare_count *count;
	char *err;
	size_t errlen;
	char path[JOBSHARE_PATH_MAX + 1];
};

static int send_all(struct sender *s, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t w = send(s->fd, p, len, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return fail(s->err, s->errlen, "sending to a host: %s",
				    w < 0 ? strerror(errno) : "closed");
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

static int send_head(struct sender *s, char kind, size_t root, mode_t mode, uint64_t size)
{
	char head[HEAD_MAX];
	size_t plen = strlen(s->path);
	int n = snprintf(head, sizeof(head), "%c %zu %o %llu %zu\n", kind, root,
			 (unsigned)(mode & 07777), (unsigned long long)size, plen);

	return send_all(s, head, (size_t)n) < 0 ? -1 : send_all(s, s->path, plen);
}

/* size bytes of fd, zeros where the file got shorter meanwhile (the size was said) */
static int send_data(struct sender *s, int fd, uint64_t size)
{
	char buf[65536];

	while (size > 0) {
		size_t want = size < sizeof(buf) ? (size_t)size : sizeof(buf);
		ssize_t r = read(fd, buf, want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return fail(s->err, s->errlen, "reading %s: %s", s->path, strerror(errno));
		if (r == 0) {
			memset(buf, 0, want);
			r = (ssize_t)want;
		}
		if (send_all(s, buf, (size_t)r) < 0)
			return -1;
		size -= (uint64_t)r;
	}
	return 0;
}

static int send_file(struct sender *s, int dfd, const char *name, size_t root)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), rc;
	struct stat st;

	if (fd < 0) /* gone meanwhile: left out; unreadable: said */
		return errno == ENOENT || errno == ELOOP
			       ? 0
			       : fail(s->err, s->errlen, "reading %s: %s", s->path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return 0; /* replaced meanwhile by what is left out */
	}
	rc = send_head(s, 'F', root, st.st_mode, (uint64_t)st.st_size);
	if (rc == 0 && (rc = send_data(s, fd, (uint64_t)st.st_size)) == 0) {
		s->count->files++;
		s->count->bytes += (uint64_t)st.st_size;
	}
	close(fd);
	return rc;
}

static int send_tree(struct sender *s, int dfd, size_t root, int depth);

/* One entry of a folder: s->path is the folder's path, extended here and cut back. */
static int send_entry(struct sender *s, int dfd, const char *name, size_t root, int depth)
{
	size_t plen = strlen(s->path);
	struct stat st;
	int rc = 0, sub;

	if (snprintf(s->path + plen, sizeof(s->path) - plen, "%s%s", plen ? "/" : "", name) >=
	    (int)(sizeof(s->path) - plen))
		return fail(s->err, s->errlen, "a path is longer than %d bytes", JOBSHARE_PATH_MAX);
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		/* gone meanwhile: left out */
	} else if (S_ISREG(st.st_mode)) {
		rc = send_file(s, dfd, name, root);
	} else if (S_ISDIR(st.st_mode)) {
		if (depth >= JOBSHARE_DEPTH_MAX)
			rc = fail(s->err, s->errlen, "%s: folders nested deeper than %d", s->path,
				  JOBSHARE_DEPTH_MAX);
		else if ((rc = send_head(s, 'D', root, st.st_mode, 0)) == 0 &&
			 (sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
			rc = send_tree(s, sub, root, depth + 1);
			close(sub);
		}
	}
	s->path[plen] = '\0';
	return rc;
}

/* Everything in the folder dfd (not closed here). */
static int send_tree(struct sender *s, int dfd, size_t root, int depth)
{
	int own = dup(dfd), rc = 0;
	DIR *d = own >= 0 ? fdopendir(own) : NULL;
	struct dirent *e;

	if (!d) {
		if (own >= 0)
			close(own);
		return fail(s->err, s->errlen, "reading %s: %s", s->path[0] ? s->path : ".",
			    strerror(errno));
	}
	while (rc == 0 && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			rc = send_entry(s, dfd, e->d_name, root, depth);
	closedir(d);
	return rc;
}

static int send_roots(int fd, char *const roots[], size_t n, struct jobshare_count *count,
		      char *err, size_t errlen)
{
	struct sender s = {fd, count, err, errlen, ""};
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0; i++) {
		int dfd = open(roots[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0)
			return fail(err, errlen, "%s: %s", roots[i], strerror(errno));
		s.path[0] = '\0';
		rc = send_tree(&s, dfd, i, 0);
		close(dfd);
	}
	return rc < 0 ? -1 : send_all(&s, "E 0 0 0 0\n", 10);
}

/* What a sending child reports on the shared pipe: one write, under PIPE_BUF, so the
 * children's reports never mix. */
struct report {
	int ok;
	struct jobshare_count count;
	char err[256];
};

/* One host's copy, in a child of its own: the hosts are served at once. */
static pid_t serve_one(int lfd, int cfd, int out, char *const roots[], size_t n)
{
	pid_t pid = fork();

	if (pid == 0) {
		struct report r = {0};
		close(lfd);
		io_timeouts(cfd);
		r.ok = send_roots(cfd, roots, n, &r.count, r.err, sizeof(r.err)) == 0;
		close(cfd);
		_exit(write(out, &r, sizeof(r)) == (ssize_t)sizeof(r) && r.ok ? 0 : 1);
	}
	close(cfd);
	return pid;
}

/* Every child's report read and every child reaped; 0 when all sent everything. */
static int collect(int in, pid_t *kids, int n_kids, struct jobshare_count *sent, char *err,
		   size_t errlen)
{
	struct report r;
	int rc = 0, status;

	for (int i = 0; i < n_kids; i++) {
		if (read(in, &r, sizeof(r)) != (ssize_t)sizeof(r)) {
			r.ok = 0;
			snprintf(r.err, sizeof(r.err), "a sender ended without a word");
		}
		if (r.ok)
			*sent = r.count; /* each host gets the same */
		else if (rc == 0)
			rc = fail(err, errlen, "%s", r.err);
	}
	for (int i = 0; i < n_kids; i++)
		while (waitpid(kids[i], &status, 0) < 0 && errno == EINTR) {
		}
	return rc;
}

int jobshare_serve(const char *addr, int port, int peers, char *const roots[], size_t n,
		   int timeout_s, struct jobshare_count *sent, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl = address(addr, port, &ss);
	struct timespec deadline;
	pid_t kids[JOBSHARE_MAX_HOSTS];
	int lfd = -1, one = 1, rc = 0, n_kids = 0, rep[2] = {-1, -1};

	memset(sent, 0, sizeof(*sent));
	if (!sl || peers < 1 || peers > JOBSHARE_MAX_HOSTS)
		return fail(err, errlen, "%s is not an address, or %d hosts are too many", addr,
			    peers);
	lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&ss, sl) < 0 || listen(lfd, 16) < 0 ||
	    pipe2(rep, O_CLOEXEC) < 0) {
		rc = fail(err, errlen, "listening on %s port %d: %s", addr, port, strerror(errno));
		goto out;
	}
	deadline_in(&deadline, timeout_s);
	while (n_kids < peers) {
		struct pollfd p = {lfd, POLLIN, 0};
		int cfd, ready;
		do
			ready = poll(&p, 1, ms_left(&deadline));
		while (ready < 0 && errno == EINTR);
		if (ready <= 0 || ms_left(&deadline) == 0) { /* also: accept failing until then */
			rc = fail(err, errlen, "%d of %d hosts did not come for the job's folders "
					       "within %d s", peers - n_kids, peers, timeout_s);
			break;
		}
		if ((cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0) {
			usleep(100 * 1000); /* out of fds, say: not a busy loop until the deadline */
			continue;
		}
		if ((kids[n_kids] = serve_one(lfd, cfd, rep[1], roots, n)) < 0) {
			rc = fail(err, errlen, "fork: %s", strerror(errno));
			break;
		}
		n_kids++;
	}
	close(rep[1]);
	rep[1] = -1;
	if (rc < 0) { /* the job fails: the copies under way end now */
		char ignored[8];
		for (int i = 0; i < n_kids; i++)
			kill(kids[i], SIGKILL);
		collect(rep[0], kids, n_kids, sent, ignored, sizeof(ignored));
	} else {
		rc = collect(rep[0], kids, n_kids, sent, err, errlen);
	}
out:
	for (int i = 0; i < 2; i++)
		if (rep[i] >= 0)
			close(rep[i]);
	if (lfd >= 0)
		close(lfd);
	return rc;
}

/* ---- receiving ---- */

struct reader {
	int fd;
	char buf[65536];
	size_t pos, len;
};

/* Up to want bytes into out (or only skipped, out NULL); the count, 0 at EOF, -1. */
static ssize_t take(struct reader *r, char *out, size_t want)
{
	if (r->pos == r->len) {
		ssize_t n;
		do
			n = read(r->fd, r->buf, sizeof(r->buf));
		while (n < 0 && errno == EINTR);
		if (n <= 0)
			return n;
		r->pos = 0;
		r->len = (size_t)n;
	}
	size_t k = r->len - r->pos < want ? r->len - r->pos : want;
	if (out)
		memcpy(out, r->buf + r->pos, k);
	r->pos += k;
	return (ssize_t)k;
}

static int take_exact(struct reader *r, char *out, size_t want, char *err, size_t errlen)
{
	while (want > 0) {
		ssize_t n = take(r, out, want);
		if (n <= 0)
			return fail(err, errlen, "algo-1's stream ended early: %s",
				    n < 0 ? strerror(errno) : "closed");
		out += n;
		want -= (size_t)n;
	}
	return 0;
}

static int take_line(struct reader *r, char *line, size_t size, char *err, size_t errlen)
{
	for (size_t i = 0; i + 1 < size; i++) {
		if (take_exact(r, line + i, 1, err, errlen) < 0)
			return -1;
		if (line[i] == '\n') {
			line[i] = '\0';
			return 0;
		}
	}
	return fail(err, errlen, "algo-1 sent a malformed record");
}

/* size bytes of the stream into fd. */
static int write_data(struct reader *r, int fd, uint64_t size, const char *path, char *err,
		      size_t errlen)
{
	char buf[65536];

	while (size > 0) {
		size_t want = size < sizeof(buf) ? (size_t)size : sizeof(buf);
		if (take_exact(r, buf, want, err, errlen) < 0)
			return -1;
		for (size_t done = 0; done < want;) {
			ssize_t w = write(fd, buf + done, want - done);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return fail(err, errlen, "writing %s: %s", path,
					    w < 0 ? strerror(errno) : "short write");
			done += (size_t)w;
		}
		size -= want;
	}
	return 0;
}

struct record {
	char kind;
	size_t root, len;
	unsigned mode;
	unsigned long long size;
	char path[JOBSHARE_PATH_MAX + 1];
};

static int take_record(struct reader *r, size_t n_roots, struct record *rec, char *err,
		       size_t errlen)
{
	char line[HEAD_MAX], tail;

	if (take_line(r, line, sizeof(line), err, errlen) < 0)
		return -1;
	if (sscanf(line, "%c %zu %o %llu %zu%c", &rec->kind, &rec->root, &rec->mode, &rec->size,
		   &rec->len, &tail) != 5)
		return fail(err, errlen, "algo-1 sent a malformed record");
	if (rec->kind == 'E')
		return 0;
	if ((rec->kind != 'D' && rec->kind != 'F') || rec->root >= n_roots ||
	    rec->len > JOBSHARE_PATH_MAX)
		return fail(err, errlen, "algo-1 sent a malformed record");
	if (take_exact(r, rec->path, rec->len, err, errlen) < 0)
		return -1;
	rec->path[rec->len] = '\0';
	if (strlen(rec->path) != rec->len || !jobshare_path_ok(rec->path))
		return fail(err, errlen, "algo-1 sent a path that is not beneath its folder");
	return 0;
}

/* One record written beneath dfd: the tree is this host's fresh scratch folder, written
 * by nobody else before the command starts, and no record makes a link. */
static int put_record(struct reader *r, int dfd, const struct record *rec,
		      struct jobshare_count *got, char *err, size_t errlen)
{
	struct stat st;
	int fd, rc;

	if (rec->kind == 'D') {
		if (mkdirat(dfd, rec->path, (rec->mode & 0777) | 0700) == 0 ||
		    (errno == EEXIST && fstatat(dfd, rec->path, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		     S_ISDIR(st.st_mode)))
			return 0;
		return fail(err, errlen, "making %s: %s", rec->path, strerror(errno));
	}
	fd = openat(dfd, rec->path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return fail(err, errlen, "writing %s: %s", rec->path, strerror(errno));
	rc = write_data(r, fd, rec->size, rec->path, err, errlen);
	if (rc == 0 && fchmod(fd, rec->mode & 0777) < 0)
		rc = fail(err, errlen, "mode of %s: %s", rec->path, strerror(errno));
	if (close(fd) < 0 && rc == 0)
		rc = fail(err, errlen, "writing %s: %s", rec->path, strerror(errno));
	if (rc == 0) {
		got->files++;
		got->bytes += rec->size;
	}
	return rc;
}

/* Connected to addr:port, retried while nothing listens there yet. */
static int dial(const char *addr, int port, int timeout_s, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl = address(addr, port, &ss);
	struct timespec deadline;

	if (!sl)
		return fail(err, errlen, "%s is not an address", addr);
	deadline_in(&deadline, timeout_s);
	for (;;) {
		int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return fail(err, errlen, "socket: %s", strerror(errno));
		io_timeouts(fd);
		if (connect(fd, (struct sockaddr *)&ss, sl) == 0)
			return fd;
		int e = errno;
		close(fd);
		if ((e != ECONNREFUSED && e != EINTR && e != EAGAIN && e != ETIMEDOUT &&
		     e != EHOSTUNREACH && e != ENETUNREACH) ||
		    ms_left(&deadline) == 0)
			return fail(err, errlen, "connecting to algo-1 (%s port %d): %s", addr,
				    port, strerror(e));
		usleep(200 * 1000);
	}
}

int jobshare_fetch(const char *addr, int port, char *const roots[], size_t n, int timeout_s,
		   struct jobshare_count *got, char *err, size_t errlen)
{
	static struct reader r; /* 64 KiB: off the stack of the job's first process */
	int dfd[JOBSHARE_MAX_ROOTS], rc = 0;
	struct record rec;
	size_t opened = 0;

	memset(got, 0, sizeof(*got));
	if (n > JOBSHARE_MAX_ROOTS)
		return fail(err, errlen, "more than %d folders", JOBSHARE_MAX_ROOTS);
	for (; opened < n; opened++)
		if ((dfd[opened] = open(roots[opened], O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
							   O_CLOEXEC)) < 0) {
			rc = fail(err, errlen, "%s: %s", roots[opened], strerror(errno));
			goto out;
		}
	memset(&r, 0, sizeof(r));
	if ((r.fd = dial(addr, port, timeout_s, err, errlen)) < 0) {
		rc = -1;
		goto out;
	}
	/* a record that cannot be written ends the copy with its reason */
	while ((rc = take_record(&r, n, &rec, err, errlen)) == 0 && rec.kind != 'E' &&
	       (rc = put_record(&r, dfd[rec.root], &rec, got, err, errlen)) == 0) {
	}
	close(r.fd);
out:
	while (opened > 0)
		close(dfd[--opened]);
	return rc;
}
