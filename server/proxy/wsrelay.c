/* wsrelay.c - see wsrelay.h. One epoll thread; each relay is a pair of
 * half-duplex pipes with a bounded buffer. A side that reaches EOF has its
 * peer's write half shut down; the relay ends when both directions are done
 * or either side errors. */
#include "proxy/wsrelay.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "labd/log.h"

struct pipe_dir {
	char *buf;
	size_t len, off;
	bool eof; /* source closed: shut down the sink once drained */
};

/* Where the bytes sent so far stand in the WebSocket frame stream, so labd
 * only ever inserts its own close frame between two of Jupyter's frames. */
struct frame_pos {
	unsigned char head[14];
	size_t head_len;   /* header bytes seen of the current frame */
	uint64_t left;     /* payload bytes still to come */
	bool in_payload;
	bool saw_close; /* a close frame went through: the closing is clean already */
};

struct relay {
	int client, upstream;
	struct MHD_UpgradeResponseHandle *urh;
	struct pipe_dir up;   /* client -> upstream */
	struct pipe_dir down; /* upstream -> client */
	struct frame_pos down_pos;
	char owner[33];
	struct relay *prev, *next;
};

struct wsrelay {
	int epfd, wakefd;
	pthread_t thread;
	pthread_mutex_t lock; /* guards the list; the thread does all the I/O */
	struct relay *list;
	bool stopping;
	char close_owner[33]; /* set by wsrelay_close_owner, handled by the thread */
};

/* Tags in epoll data: the relay pointer with the low bit telling the side;
 * 0 is the wake eventfd, DROPPED an event of a relay freed in this batch. */
#define SIDE_UPSTREAM 1u
#define DROPPED ((uint64_t)1 << 63)
#define RELAY_OF(tag) ((struct relay *)(uintptr_t)((tag) & ~(uint64_t)SIDE_UPSTREAM))

static void watch(struct wsrelay *r, struct relay *x)
{
	struct epoll_event ev;
	uint32_t client_ev = 0, up_ev = 0;

	/* Read from a side only while the buffer toward the other has room. */
	if (!x->up.eof && x->up.len < WSRELAY_BUFFER)
		client_ev |= EPOLLIN;
	if (!x->down.eof && x->down.len < WSRELAY_BUFFER)
		up_ev |= EPOLLIN;
	if (x->down.off < x->down.len)
		client_ev |= EPOLLOUT;
	if (x->up.off < x->up.len)
		up_ev |= EPOLLOUT;
	ev.events = client_ev | EPOLLRDHUP;
	ev.data.u64 = (uint64_t)(uintptr_t)x;
	epoll_ctl(r->epfd, EPOLL_CTL_MOD, x->client, &ev);
	ev.events = up_ev | EPOLLRDHUP;
	ev.data.u64 = (uint64_t)(uintptr_t)x | SIDE_UPSTREAM;
	epoll_ctl(r->epfd, EPOLL_CTL_MOD, x->upstream, &ev);
}

static void relay_free(struct wsrelay *r, struct relay *x)
{
	log_debug("wsrelay: closing a relay of %s (client eof %d, upstream eof %d)", x->owner,
		  x->up.eof, x->down.eof);
	epoll_ctl(r->epfd, EPOLL_CTL_DEL, x->client, NULL);
	epoll_ctl(r->epfd, EPOLL_CTL_DEL, x->upstream, NULL);
	pthread_mutex_lock(&r->lock);
	if (x->prev)
		x->prev->next = x->next;
	else
		r->list = x->next;
	if (x->next)
		x->next->prev = x->prev;
	pthread_mutex_unlock(&r->lock);
	close(x->upstream);
	/* The client socket belongs to libmicrohttpd: close it only this way. */
	MHD_upgrade_action(x->urh, MHD_UPGRADE_ACTION_CLOSE);
	free(x->up.buf);
	free(x->down.buf);
	free(x);
}

/* Moves bytes from src into d's buffer; false on a hard error. */
static bool fill(int src, struct pipe_dir *d)
{
	if (d->off == d->len)
		d->off = d->len = 0;
	if (d->off > 0 && d->len == WSRELAY_BUFFER) {
		memmove(d->buf, d->buf + d->off, d->len - d->off);
		d->len -= d->off;
		d->off = 0;
	}
	while (!d->eof && d->len < WSRELAY_BUFFER) {
		ssize_t n = recv(src, d->buf + d->len, WSRELAY_BUFFER - d->len, 0);
		if (n > 0)
			d->len += (size_t)n;
		else if (n == 0)
			d->eof = true;
		else if (errno == EINTR)
			continue;
		else
			return errno == EAGAIN || errno == EWOULDBLOCK;
	}
	return true;
}

/* The header length once its first bytes are known (RFC 6455 section 5.2). */
static size_t frame_head_len(const struct frame_pos *f)
{
	size_t n = 2;
	if (f->head_len < 2)
		return 2;
	if ((f->head[1] & 0x7f) == 126)
		n += 2;
	else if ((f->head[1] & 0x7f) == 127)
		n += 8;
	return n + ((f->head[1] & 0x80) ? 4 : 0);
}

static void frame_advance(struct frame_pos *f, const unsigned char *p, size_t n)
{
	while (n > 0) {
		if (f->in_payload) {
			uint64_t take = f->left < n ? f->left : n;
			f->left -= take;
			p += take;
			n -= (size_t)take;
			if (f->left == 0)
				f->in_payload = false, f->head_len = 0;
			continue;
		}
		f->head[f->head_len++] = *p++;
		n--;
		if (f->head_len < 2 || f->head_len < frame_head_len(f))
			continue;
		f->saw_close = f->saw_close || (f->head[0] & 0x0f) == 0x8;
		unsigned len7 = f->head[1] & 0x7f;
		f->left = len7;
		if (len7 == 126)
			f->left = (uint64_t)f->head[2] << 8 | f->head[3];
		else if (len7 == 127)
			for (int i = 0; i < 8; i++)
				f->left = f->left << 8 | f->head[2 + i];
		f->in_payload = f->left > 0;
		if (!f->in_payload)
			f->head_len = 0;
	}
}

static bool at_frame_boundary(const struct frame_pos *f)
{
	return !f->in_payload && f->head_len == 0;
}

/* Writes d's buffer to dst; false on a hard error. When pos is given, it
 * follows the frames sent. */
static bool drain_frames(int dst, struct pipe_dir *d, struct frame_pos *pos)
{
	while (d->off < d->len) {
		ssize_t n = send(dst, d->buf + d->off, d->len - d->off, MSG_NOSIGNAL);
		if (n > 0) {
			if (pos)
				frame_advance(pos, (unsigned char *)d->buf + d->off, (size_t)n);
			d->off += (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else {
			return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
		}
	}
	return true;
}

/* Tells the browser the server is going away (RFC 6455 close frame, status
 * 1001) when no frame of Jupyter's is half sent, so it sees a clean close
 * rather than 1006. Best effort: the socket is closed right after. */
static void send_going_away(struct relay *x)
{
	static const unsigned char frame[] = {0x88, 0x02, 0x03, 0xe9};

	if (!x->down_pos.saw_close && at_frame_boundary(&x->down_pos) &&
	    send(x->client, frame, sizeof(frame), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		log_debug("wsrelay: close frame to %s not sent", x->owner);
}

/* One step of a relay after an event; false when it is finished. */
static bool step(struct relay *x)
{
	if (!fill(x->client, &x->up) || !fill(x->upstream, &x->down))
		return false;
	if (!drain_frames(x->upstream, &x->up, NULL) || !drain_frames(x->client, &x->down, &x->down_pos))
		return false;
	if (x->up.eof && x->up.off == x->up.len)
		shutdown(x->upstream, SHUT_WR);
	if (x->down.eof && x->down.off == x->down.len) {
		send_going_away(x); /* Jupyter went away, perhaps without a close frame */
		shutdown(x->client, SHUT_WR);
	}
	/* Either side closing ends the WebSocket: a half-open one has no use. */
	return !(x->up.eof && x->up.off == x->up.len) && !(x->down.eof && x->down.off == x->down.len);
}

static void close_matching(struct wsrelay *r, const char *owner)
{
	struct relay *x, *next;

	pthread_mutex_lock(&r->lock);
	x = r->list;
	pthread_mutex_unlock(&r->lock);
	for (; x; x = next) {
		next = x->next;
		if (!owner || strcmp(x->owner, owner) == 0) {
			send_going_away(x);
			relay_free(r, x);
		}
	}
}

static void *relay_loop(void *arg)
{
	struct wsrelay *r = arg;
	struct epoll_event events[64];

	for (;;) {
		int n = epoll_wait(r->epfd, events, 64, -1);
		if (n < 0 && errno == EINTR)
			continue;
		for (int i = 0; i < n; i++) {
			if (events[i].data.u64 == 0) {
				uint64_t v;
				if (read(r->wakefd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					log_errno("wsrelay: wake read");
				pthread_mutex_lock(&r->lock);
				bool stop = r->stopping;
				char owner[33];
				snprintf(owner, sizeof(owner), "%s", r->close_owner);
				r->close_owner[0] = '\0';
				pthread_mutex_unlock(&r->lock);
				if (stop) {
					close_matching(r, NULL);
					return NULL;
				}
				if (owner[0])
					close_matching(r, owner);
				/* the same batch may name relays just freed */
				n = 0;
				break;
			}
			if (events[i].data.u64 == DROPPED)
				continue;
			struct relay *x = RELAY_OF(events[i].data.u64);
			if (!step(x)) {
				/* later events in this batch may name x: drop them */
				for (int j = i + 1; j < n; j++)
					if (events[j].data.u64 != DROPPED && RELAY_OF(events[j].data.u64) == x)
						events[j].data.u64 = DROPPED;
				relay_free(r, x);
			} else {
				watch(r, x);
			}
		}
	}
}

int wsrelay_start(struct wsrelay **out)
{
	struct wsrelay *r = calloc(1, sizeof(*r));
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};

	if (!r)
		return log_errno("wsrelay: calloc");
	pthread_mutex_init(&r->lock, NULL);
	r->epfd = epoll_create1(EPOLL_CLOEXEC);
	r->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->epfd < 0 || r->wakefd < 0 || epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->wakefd, &ev) < 0 ||
	    pthread_create(&r->thread, NULL, relay_loop, r) != 0) {
		log_errno("wsrelay: start");
		free(r);
		return -1;
	}
	*out = r;
	return 0;
}

static void poke(struct wsrelay *r)
{
	uint64_t one = 1;
	if (write(r->wakefd, &one, sizeof(one)) < 0)
		log_errno("wsrelay: wake");
}

void wsrelay_stop(struct wsrelay *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stopping = true;
	pthread_mutex_unlock(&r->lock);
	poke(r);
	pthread_join(r->thread, NULL);
	close(r->wakefd);
	close(r->epfd);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

void wsrelay_close_owner(struct wsrelay *r, const char *owner)
{
	pthread_mutex_lock(&r->lock);
	snprintf(r->close_owner, sizeof(r->close_owner), "%s", owner);
	pthread_mutex_unlock(&r->lock);
	poke(r);
}

int wsrelay_count(struct wsrelay *r, const char *owner)
{
	int n = 0;
	pthread_mutex_lock(&r->lock);
	for (struct relay *x = r->list; x; x = x->next)
		n += strcmp(x->owner, owner) == 0;
	pthread_mutex_unlock(&r->lock);
	return n;
}

static bool seed(struct pipe_dir *d, const char *bytes, size_t n)
{
	d->buf = malloc(WSRELAY_BUFFER);
	if (!d->buf || n > WSRELAY_BUFFER)
		return false;
	memcpy(d->buf, bytes, n);
	d->len = n;
	return true;
}

int wsrelay_add(struct wsrelay *r, int client_fd, struct MHD_UpgradeResponseHandle *urh,
		int upstream_fd, const char *to_upstream, size_t n_up, const char *to_client,
		size_t n_client, const char *owner)
{
	struct relay *x = calloc(1, sizeof(*x));
	struct epoll_event ev = {.events = 0};

	if (!x || !seed(&x->up, to_upstream, n_up) || !seed(&x->down, to_client, n_client)) {
		if (x) {
			free(x->up.buf);
			free(x->down.buf);
			free(x);
		}
		close(upstream_fd);
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		return log_error("wsrelay: out of memory");
	}
	x->client = client_fd;
	x->upstream = upstream_fd;
	x->urh = urh;
	snprintf(x->owner, sizeof(x->owner), "%s", owner);
	fcntl(client_fd, F_SETFL, fcntl(client_fd, F_GETFL) | O_NONBLOCK);
	/* Kernel replies are small frames right after a small "busy" frame: with
	 * Nagle on, each waited ~40 ms for the browser's delayed ACK. */
	int one = 1;
	setsockopt(client_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(upstream_fd, F_SETFL, fcntl(upstream_fd, F_GETFL) | O_NONBLOCK);
	pthread_mutex_lock(&r->lock);
	x->next = r->list;
	if (r->list)
		r->list->prev = x;
	r->list = x;
	pthread_mutex_unlock(&r->lock);
	ev.data.u64 = (uint64_t)(uintptr_t)x;
	epoll_ctl(r->epfd, EPOLL_CTL_ADD, client_fd, &ev);
	ev.data.u64 = (uint64_t)(uintptr_t)x | SIDE_UPSTREAM;
	epoll_ctl(r->epfd, EPOLL_CTL_ADD, upstream_fd, &ev);
	watch(r, x); /* arms both, and flushes seeded bytes on the first event */
	return 0;
}
