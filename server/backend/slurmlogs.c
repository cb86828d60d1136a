/* slurmlogs.c - see slurmlogs.h.
 *
 * One source per (job, host): the bytes taken from that host's log so far (its offset
 * on the node) and, with several hosts, the partial last line held back. A pull marks
 * its source busy and does its network and file work unlocked, so a slow node holds up
 * only the pulls of its own (job, host); a second pull of the same source waits for
 * the first (no byte is taken twice).
 *
 * Each host's offset is kept in the sidecar <id>.log.hosts (one fixed record a host,
 * written after each append: a crash between the two repeats at most one pull's lines,
 * never loses them), so that a source made again (a web restart, a retry's first pull)
 * starts from what the head has. The offset kept excludes the held partial line, which
 * the next process reads again. A one-host log of an older release has no sidecar: the
 * head's file is the node's bytes as they were (no prefix), so its size is the offset.
 *
 * An offset counts on one node's log. The sidecar <id>.log.nodes keeps that node's data
 * address a host (a fixed record too): a retry that Slurm placed on another node starts
 * that node's log from its beginning, where the offset taken on the first node would
 * have skipped as many of its bytes. */
#include "backend/slurmlogs.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "labd/buf.h"
#include "labd/clock.h"
#include "labd/log.h"

#define CONNECT_MS 2000
#define PULL_MS 10000	      /* one pull reads no longer: the next one goes on */
#define CHUNK_BYTES 65536
#define RECORD_BYTES 21	      /* an offset record: 20 digits and '\n' */
#define NODE_BYTES 128	      /* a node record: its data address, NULs after it */
/* beside <id>.log: each host's offset, and the node whose log it counts on */
static const char *const sidecars[] = {SLURMLOGS_OFFSETS, SLURMLOGS_NODES};
#define PREFIX_MAX 24	      /* "[algo-64] " */
/* a chunk's lines with their prefixes: at worst every byte a line */
#define OUT_MAX (SLURMLOGS_LINE_MAX + (size_t)CHUNK_BYTES * (PREFIX_MAX + 1))

struct source {
	int64_t job_id;
	int host;
	int64_t offset; /* bytes taken from the host's log, the held ones with them */
	char node[NODE_BYTES]; /* the data address of the node whose log that is; "" unknown */
	struct buf held; /* slurmlogs_held_init */
	bool busy;
};

struct slurmlogs {
	char dir[PATH_MAX]; /* <state_dir>/joblogs */
	struct link_secret secret;
	pthread_mutex_t lock;
	pthread_cond_t idle; /* a source stopped being busy */
	struct source **v;
	size_t n, cap;
};

/* ---- the pure part: lines of several hosts ---- */

void slurmlogs_held_init(struct buf *held)
{
	buf_init(held, SLURMLOGS_LINE_MAX);
}

/* One prefixed line of line_len bytes, its newline added. */
static int add_line(struct buf *out, const char *prefix, const char *line, size_t line_len)
{
	int rc;

	if ((rc = buf_add(out, prefix, strlen(prefix))) < 0 || (rc = buf_add(out, line, line_len)) < 0)
		return rc;
	return buf_add(out, "\n", 1);
}

int slurmlogs_prefix(int host, struct buf *held, const char *in, size_t len, bool final,
		     struct buf *out)
{
	char prefix[PREFIX_MAX];
	struct buf all;
	size_t start = 0;
	int rc;

	snprintf(prefix, sizeof(prefix), "[algo-%d] ", host);
	buf_init(&all, held->len + len);
	if ((rc = buf_add(&all, held->data, held->len)) < 0 || (rc = buf_add(&all, in, len)) < 0) {
		buf_release(&all);
		return rc;
	}
	for (size_t i = 0; i < all.len && rc == 0; i++) {
		/* a line longer than the bound is cut there: a writer without newlines must
		 * not grow the held bytes for ever */
		if (all.data[i] == '\n' || i + 1 - start >= SLURMLOGS_LINE_MAX) {
			size_t end = all.data[i] == '\n' ? i : i + 1;
			rc = add_line(out, prefix, all.data + start, end - start);
			start = i + 1;
		}
	}
	if (rc == 0 && final && start < all.len)
		rc = add_line(out, prefix, all.data + start, all.len - start);
	if (rc == 0) {
		buf_clear(held);
		if (!final && start < all.len)
			rc = buf_add(held, all.data + start, all.len - start); /* < the bound: fits */
	}
	buf_release(&all);
	return rc;
}

/* ---- the head's files ---- */

static int open_dir(const struct slurmlogs *l)
{
	int fd = open(l->dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* The job's log (or its sidecar) in the head's joblogs/, a regular file opened
 * without following a link. The fd or a negative errno. */
static int open_file(int dfd, int64_t job_id, const char *suffix, int flags)
{
	char name[48];
	struct stat st;
	int fd;

	snprintf(name, sizeof(name), "%" PRId64 ".log%s", job_id, suffix);
	if ((fd = openat(dfd, name, flags | O_NOFOLLOW | O_CLOEXEC, 0640)) < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

static int write_all(int fd, const char *bytes, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, bytes, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		bytes += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Host's record of the job's sidecar into rec[size]; false when there is none. */
static bool read_record(int dfd, int64_t job_id, const char *suffix, int host, char *rec,
			size_t size)
{
	int fd = open_file(dfd, job_id, suffix, O_RDONLY);
	bool ok;

	if (fd < 0)
		return false;
	ok = pread(fd, rec, size, (off_t)(host - 1) * (off_t)size) == (ssize_t)size;
	close(fd);
	return ok;
}

static void write_record(int dfd, const struct source *src, const char *suffix,
			 const char *rec, size_t size)
{
	int fd = open_file(dfd, src->job_id, suffix, O_WRONLY | O_CREAT);

	if (fd < 0 || pwrite(fd, rec, size, (off_t)(src->host - 1) * (off_t)size) != (ssize_t)size)
		log_warn("job %" PRId64 "'s log: cannot keep host %d's place (%s): %s",
			 src->job_id, src->host, suffix, strerror(fd < 0 ? -fd : errno));
	if (fd >= 0)
		close(fd);
}

/* Where a source made again starts, and on which node's log: see the top. */
static void recover(int dfd, struct source *src, int hosts)
{
	char rec[RECORD_BYTES + 1] = {0}, node[NODE_BYTES];
	struct stat st;
	int fd;

	src->offset = 0;
	if (read_record(dfd, src->job_id, SLURMLOGS_OFFSETS, src->host, rec, RECORD_BYTES)) {
		src->offset = strtoll(rec, NULL, 10);
	} else if (hosts == 1 && (fd = open_file(dfd, src->job_id, "", O_RDONLY)) >= 0) {
		src->offset = fstat(fd, &st) == 0 ? st.st_size : 0;
		close(fd);
	}
	if (src->offset < 0)
		src->offset = 0;
	if (read_record(dfd, src->job_id, SLURMLOGS_NODES, src->host, node, NODE_BYTES) &&
	    memchr(node, '\0', NODE_BYTES))
		memcpy(src->node, node, NODE_BYTES);
}

static void keep_offset(int dfd, const struct source *src)
{
	char rec[RECORD_BYTES + 1];

	snprintf(rec, sizeof(rec), "%020" PRId64 "\n", src->offset - (int64_t)src->held.len);
	write_record(dfd, src, SLURMLOGS_OFFSETS, rec, RECORD_BYTES);
}

static void keep_node(int dfd, const struct source *src)
{
	write_record(dfd, src, SLURMLOGS_NODES, src->node, NODE_BYTES);
}

/* Appends one chunk taken from the host to the head's log; the source's offset and
 * held line move only when it was written. */
static int take(int dfd, struct source *src, int hosts, const char *bytes, size_t len, bool final)
{
	struct buf out, held;
	int fd, rc = 0;

	buf_init(&out, OUT_MAX);
	slurmlogs_held_init(&held);
	if (hosts > 1 && ((rc = buf_add(&held, src->held.data, src->held.len)) < 0 ||
			  (rc = slurmlogs_prefix(src->host, &held, bytes, len, final, &out)) < 0))
		goto out;
	if ((fd = open_file(dfd, src->job_id, "", O_WRONLY | O_APPEND | O_CREAT)) < 0) {
		rc = fd;
		goto out;
	}
	rc = hosts > 1 ? write_all(fd, out.data, out.len) : write_all(fd, bytes, len);
	close(fd);
	if (rc == 0) {
		src->offset += (int64_t)len;
		if (hosts > 1) {
			struct buf was = src->held;
			src->held = held;
			held = was; /* released below */
		}
		keep_offset(dfd, src);
	}
out:
	buf_release(&out);
	buf_release(&held);
	return rc;
}

/* ---- the pull ---- */

/* Reads what the node sends for the source's offset until it closes; each chunk
 * appended as it comes. 0, or a negative errno. */
static int fetch(struct slurmlogs *l, int dfd, struct source *src, const char *data, int hosts)
{
	char path[64], *chunk = malloc(CHUNK_BYTES);
	long long deadline_ms = clock_ms() + PULL_MS;
	int fd = -1, rc;

	if (!chunk)
		return -ENOMEM;
	if ((rc = link_data_joblog_path(src->job_id, src->offset, path, sizeof(path))) < 0 ||
	    (rc = fd = link_data_connect(&l->secret, data, path, CONNECT_MS)) < 0)
		goto out;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		long long left = deadline_ms - clock_ms();
		if (left <= 0 || poll(&p, 1, (int)left) == 0) {
			rc = -ETIMEDOUT;
			break;
		}
		ssize_t n = read(fd, chunk, CHUNK_BYTES);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : 0;
			break;
		}
		if ((rc = take(dfd, src, hosts, chunk, (size_t)n, false)) < 0)
			break;
	}
out:
	if (fd >= 0)
		close(fd);
	free(chunk);
	return rc;
}

/* The source's offset counts on data's log from here: on another node's log than the
 * one it was taken from (a retry placed elsewhere) it starts at 0, and a partial line
 * held from the old log is written as it is. An address too long for its record is not
 * kept (the next source made takes the offset as it stands). */
static void follow_node(int dfd, struct source *src, const char *data, int hosts)
{
	if (strcmp(src->node, data) == 0)
		return;
	if (src->node[0]) {
		log_info("job %" PRId64 "'s log: host %d now runs on %s (was %s): its log is read "
			 "from the start", src->job_id, src->host, data, src->node);
		if (hosts > 1 && src->held.len && take(dfd, src, hosts, "", 0, true) < 0)
			buf_clear(&src->held);
		src->offset = 0;
		keep_offset(dfd, src);
	}
	memset(src->node, 0, sizeof(src->node));
	if (strlen(data) < sizeof(src->node)) {
		memcpy(src->node, data, strlen(data));
		keep_node(dfd, src);
	}
}

/* Under the lock: the source of (job_id, host), made when missing; NULL when out of
 * memory. */
static struct source *source_get(struct slurmlogs *l, int64_t job_id, int host, bool *made)
{
	*made = false;
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i]->job_id == job_id && l->v[i]->host == host)
			return l->v[i];
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		struct source **v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return NULL;
		l->v = v;
		l->cap = cap;
	}
	struct source *src = calloc(1, sizeof(*src));
	if (!src)
		return NULL;
	src->job_id = job_id;
	src->host = host;
	slurmlogs_held_init(&src->held);
	l->v[l->n++] = src;
	*made = true;
	return src;
}

/* Under the lock: drops sources of job_id (host 0: all of its hosts). */
static void source_drop(struct slurmlogs *l, int64_t job_id, int host)
{
	for (size_t i = 0; i < l->n;) {
		struct source *src = l->v[i];
		if (src->job_id == job_id && (host == 0 || src->host == host)) {
			buf_release(&src->held);
			free(src);
			l->v[i] = l->v[--l->n];
		} else {
			i++;
		}
	}
}

int slurmlogs_pull(struct slurmlogs *l, const char *data, int64_t job_id, int host, int hosts,
		   bool final)
{
	struct source *src;
	bool made;
	int dfd, rc;

	if (!l || !data || !data[0] || job_id < 1 || hosts < 1 || hosts > SLURMLOGS_HOSTS_MAX ||
	    host < 1 || host > hosts)
		return -EINVAL;
	if ((dfd = open_dir(l)) < 0)
		return dfd;
	pthread_mutex_lock(&l->lock);
	for (;;) {
		if (!(src = source_get(l, job_id, host, &made))) {
			pthread_mutex_unlock(&l->lock);
			close(dfd);
			return -ENOMEM;
		}
		if (!src->busy)
			break;
		pthread_cond_wait(&l->idle, &l->lock);
	}
	src->busy = true;
	pthread_mutex_unlock(&l->lock);

	if (made)
		recover(dfd, src, hosts);
	follow_node(dfd, src, data, hosts);
	rc = fetch(l, dfd, src, data, hosts);
	if (final && hosts > 1 && src->held.len) {
		int r = take(dfd, src, hosts, "", 0, true);
		rc = rc < 0 ? rc : r;
	}
	close(dfd);

	pthread_mutex_lock(&l->lock);
	src->busy = false;
	if (final) /* the host's job ended: nothing more comes */
		source_drop(l, job_id, host);
	pthread_cond_broadcast(&l->idle);
	pthread_mutex_unlock(&l->lock);
	return rc;
}

void slurmlogs_forget(struct slurmlogs *l, int64_t job_id)
{
	char name[48];
	int dfd;
	bool busy;

	if (!l || job_id < 1)
		return;
	pthread_mutex_lock(&l->lock);
	do { /* a pull in flight would write the file again */
		busy = false;
		for (size_t i = 0; i < l->n; i++)
			busy |= l->v[i]->job_id == job_id && l->v[i]->busy;
		if (busy)
			pthread_cond_wait(&l->idle, &l->lock);
	} while (busy);
	source_drop(l, job_id, 0);
	if ((dfd = open_dir(l)) >= 0) {
		snprintf(name, sizeof(name), "%" PRId64 ".log", job_id);
		if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
			log_warn("cannot remove %s/%s: %s", l->dir, name, strerror(errno));
		for (size_t i = 0; i < sizeof(sidecars) / sizeof(sidecars[0]); i++) {
			snprintf(name, sizeof(name), "%" PRId64 ".log%s", job_id, sidecars[i]);
			unlinkat(dfd, name, 0);
		}
		close(dfd);
	}
	pthread_mutex_unlock(&l->lock);
}

struct slurmlogs *slurmlogs_new(const char *state_dir, const struct link_secret *secret)
{
	struct slurmlogs *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	snprintf(l->dir, sizeof(l->dir), "%s/joblogs", state_dir);
	l->secret = *secret;
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->idle, NULL);
	return l;
}

void slurmlogs_free(struct slurmlogs *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++) {
		buf_release(&l->v[i]->held);
		free(l->v[i]);
	}
	free(l->v);
	link_secret_clear(&l->secret);
	pthread_cond_destroy(&l->idle);
	pthread_mutex_destroy(&l->lock);
	free(l);
}
