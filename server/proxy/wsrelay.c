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

#include "labd/clock.h"
#include "labd/log.h"
#include "metrics/labd.h"
#include "proxy/wsframe.h"

struct pipe_dir {
	char *buf;
	size_t len, off;
	bool eof; /* source closed: shut down the sink once drained */
	unsigned long long read_bytes; /* all ever read from the source */
};

struct relay {
	int client, upstream;
	struct MHD_UpgradeResponseHandle *urh;
	struct pipe_dir up;   /* client -> upstream */
	struct pipe_dir down; /* upstream -> client */
	struct wsframe_pos down_pos, up_pos;
	struct wsrelay_who who;
	long long last_io_ms;   /* any byte either way, pings included */
	long long last_data_ms; /* a data frame either way: a kernel message */
	bool doomed;            /* an account event closes it (set under the lock) */
	bool fresh;             /* added, not yet armed by the thread (under the lock) */
	struct relay *prev, *next;
};

struct wsrelay {
	int epfd, wakefd;
	pthread_t thread;
	pthread_mutex_t lock; /* guards the list; the thread does all the I/O */
	struct relay *list;
	bool stopping;
	long long idle_timeout_ms;
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

/* Arms the relays wsrelay_add handed over. Only this thread sets a relay's
 * epoll interest: a worker that armed it could read its buffers while this
 * thread, woken by the first armed side, changed them, and then set the
 * other side's interest from that stale view (a side left unwatched). */
static void arm_fresh(struct wsrelay *r)
{
	pthread_mutex_lock(&r->lock);
	for (struct relay *x = r->list; x; x = x->next) {
		if (x->fresh) {
			x->fresh = false;
			watch(r, x);
		}
	}
	pthread_mutex_unlock(&r->lock);
}

static void relay_free(struct wsrelay *r, struct relay *x)
{
	log_debug("wsrelay: closing a relay of %s (client eof %d, upstream eof %d)", x->who.owner,
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
	metrics_websockets_add(-1);
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
		if (n > 0) {
			d->len += (size_t)n;
			d->read_bytes += (size_t)n;
		}
		else if (n == 0)
			d->eof = true;
		else if (errno == EINTR)
			continue;
		else
			return errno == EAGAIN || errno == EWOULDBLOCK;
	}
	return true;
}

/* Writes d's buffer to dst; false on a hard error. When pos is given, it
 * follows the frames sent. */
static bool drain_frames(int dst, struct pipe_dir *d, struct wsframe_pos *pos)
{
	while (d->off < d->len) {
		ssize_t n = send(dst, d->buf + d->off, d->len - d->off, MSG_NOSIGNAL);
		if (n > 0) {
			if (pos)
				wsframe_advance(pos, (unsigned char *)d->buf + d->off, (size_t)n);
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

	if (!x->down_pos.saw_close && wsframe_at_boundary(&x->down_pos) &&
	    send(x->client, frame, sizeof(frame), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		log_debug("wsrelay: close frame to %s not sent", x->who.owner);
}

/* One step of a relay after an event; false when it is finished. */
static bool step(struct relay *x)
{
	unsigned long long before = x->up.read_bytes + x->down.read_bytes;
	unsigned frames = x->up_pos.data_frames + x->down_pos.data_frames;

	if (!fill(x->client, &x->up) || !fill(x->upstream, &x->down))
		return false;
	if (!drain_frames(x->upstream, &x->up, &x->up_pos) ||
	    !drain_frames(x->client, &x->down, &x->down_pos))
		return false;
	if (x->up.read_bytes + x->down.read_bytes != before)
		x->last_io_ms = clock_ms();
	if (x->up_pos.data_frames + x->down_pos.data_frames != frames)
		x->last_data_ms = clock_ms();
	if (x->up.eof && x->up.off == x->up.len)
		shutdown(x->upstream, SHUT_WR);
	if (x->down.eof && x->down.off == x->down.len) {
		send_going_away(x); /* Jupyter went away, perhaps without a close frame */
		shutdown(x->client, SHUT_WR);
	}
	/* Either side closing ends the WebSocket: a half-open one has no use. */
	return !(x->up.eof && x->up.off == x->up.len) && !(x->down.eof && x->down.off == x->down.len);
}

/* Closes the relays marked doomed, those idle past the timeout, or all
 * (stopping). Only this thread frees relays, so the list read without the
 * lock stays valid; marks are read under it. */
static void close_due(struct wsrelay *r, bool all)
{
	long long now = clock_ms();
	struct relay *x, *next;

	pthread_mutex_lock(&r->lock);
	x = r->list;
	pthread_mutex_unlock(&r->lock);
	for (; x; x = next) {
		pthread_mutex_lock(&r->lock);
		next = x->next;
		bool doomed = x->doomed;
		pthread_mutex_unlock(&r->lock);
		bool idle = now - x->last_io_ms >= r->idle_timeout_ms;
		if (!all && !doomed && !idle)
			continue;
		if (idle)
			log_info("wsrelay: closing a websocket of %s idle for %lld s", x->who.owner,
				 (now - x->last_io_ms) / 1000);
		send_going_away(x);
		relay_free(r, x);
	}
}

/* How often idle relays are looked for: the timeout is whole seconds. */
#define SWEEP_EVERY_MS 1000

static void *relay_loop(void *arg)
{
	struct wsrelay *r = arg;
	struct epoll_event events[64];

	long long next_sweep_ms = clock_ms() + SWEEP_EVERY_MS;

	for (;;) {
		/* no relay, nothing to sweep: sleep until an event (wsrelay_add
		 * wakes the thread for the first relay) */
		pthread_mutex_lock(&r->lock);
		bool any = r->list != NULL;
		pthread_mutex_unlock(&r->lock);
		long long left = next_sweep_ms - clock_ms();
		int n = epoll_wait(r->epfd, events, 64, !any ? -1 : left > 0 ? (int)left : 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (!any) {
			next_sweep_ms = clock_ms() + SWEEP_EVERY_MS;
		} else if (clock_ms() >= next_sweep_ms) {
			next_sweep_ms = clock_ms() + SWEEP_EVERY_MS;
			close_due(r, false);
			continue; /* this batch may name relays just freed */
		}
		for (int i = 0; i < n; i++) {
			if (events[i].data.u64 == 0) {
				uint64_t v;
				if (read(r->wakefd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					log_errno("wsrelay: wake read");
				pthread_mutex_lock(&r->lock);
				bool stop = r->stopping;
				pthread_mutex_unlock(&r->lock);
				if (!stop)
					arm_fresh(r);
				close_due(r, stop);
				if (stop)
					return NULL;
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

int wsrelay_start(struct wsrelay **out, long long idle_timeout_ms)
{
	struct wsrelay *r = calloc(1, sizeof(*r));
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};

	if (!r)
		return log_errno("wsrelay: calloc");
	r->idle_timeout_ms = idle_timeout_ms;
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

bool wsrelay_who_matches(const struct wsrelay_who *who, enum wsrelay_scope scope, int64_t id,
			 const char *owner)
{
	switch (scope) {
	case WSRELAY_OWNER:
		return owner && strcmp(who->owner, owner) == 0;
	case WSRELAY_USER:
		return who->user_id == id || who->owner_id == id;
	case WSRELAY_USER_SESSIONS:
		return who->user_id == id && who->session_id != 0;
	case WSRELAY_SESSION:
		return who->session_id == id;
	case WSRELAY_TOKEN:
		return who->token_id == id;
	}
	return false;
}

/* Marks the matching relays under the lock; the thread closes them. */
static int close_scope(struct wsrelay *r, enum wsrelay_scope scope, int64_t id, const char *owner)
{
	int n = 0;

	if (!r || (scope != WSRELAY_OWNER && id <= 0))
		return 0;
	pthread_mutex_lock(&r->lock);
	for (struct relay *x = r->list; x; x = x->next)
		if (wsrelay_who_matches(&x->who, scope, id, owner)) {
			x->doomed = true;
			n++;
		}
	pthread_mutex_unlock(&r->lock);
	if (n)
		poke(r);
	return n;
}

void wsrelay_close_owner(struct wsrelay *r, const char *owner)
{
	close_scope(r, WSRELAY_OWNER, 0, owner);
}

int wsrelay_close(struct wsrelay *r, enum wsrelay_scope scope, int64_t id)
{
	return close_scope(r, scope, id, NULL);
}

int wsrelay_count(struct wsrelay *r, const char *owner)
{
	int n = 0;
	pthread_mutex_lock(&r->lock);
	for (struct relay *x = r->list; x; x = x->next)
		n += strcmp(x->who.owner, owner) == 0 && !x->doomed;
	pthread_mutex_unlock(&r->lock);
	return n;
}

int wsrelay_active(struct wsrelay *r, const char *owner, long long since_ms)
{
	int n = 0;
	pthread_mutex_lock(&r->lock);
	for (struct relay *x = r->list; x; x = x->next)
		n += strcmp(x->who.owner, owner) == 0 && x->last_data_ms >= since_ms;
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
		size_t n_client, const struct wsrelay_who *who)
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
	x->who = *who;
	x->last_io_ms = clock_ms();
	x->last_data_ms = 0; /* an open socket is not activity until a message moves */
	fcntl(client_fd, F_SETFL, fcntl(client_fd, F_GETFL) | O_NONBLOCK);
	/* Kernel replies are small frames right after a small "busy" frame: with
	 * Nagle on, each waited ~40 ms for the browser's delayed ACK. */
	int one = 1;
	setsockopt(client_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(upstream_fd, F_SETFL, fcntl(upstream_fd, F_GETFL) | O_NONBLOCK);
	x->fresh = true; /* watched with no event until the thread arms it */
	pthread_mutex_lock(&r->lock);
	x->next = r->list;
	if (r->list)
		r->list->prev = x;
	r->list = x;
	pthread_mutex_unlock(&r->lock);
	metrics_websockets_add(1);
	ev.data.u64 = (uint64_t)(uintptr_t)x;
	epoll_ctl(r->epfd, EPOLL_CTL_ADD, client_fd, &ev);
	ev.data.u64 = (uint64_t)(uintptr_t)x | SIDE_UPSTREAM;
	epoll_ctl(r->epfd, EPOLL_CTL_ADD, upstream_fd, &ev);
	poke(r); /* the thread arms both sides (arm_fresh); seeded bytes go on its first event */
	return 0;
}
