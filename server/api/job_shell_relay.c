/* job_shell_relay.c - see job_shell_relay.h.
 *
 * The client's side is RFC 6455 (section 5): its frames are masked, at most
 * FRAME_MAX bytes of payload each, control frames at most 125 bytes; labd's frames
 * are unmasked. A frame that breaks the rules ends the shell with close code 1002
 * (1009 when too big). What the shell writes is read only while the outgoing
 * buffer has room for a whole frame and the rate allows: a job that floods its
 * terminal blocks in its own write, and costs labd-web a bounded buffer and
 * JOB_SHELL_RATE_BYTES_PER_S of framing. */
#include "api/job_shell_relay.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "labd/app.h"
#include "labd/clock.h"
#include "jobs/shell.h"
#include "labd/log.h"
#include "labd/thread.h"
#include "store/audit.h"

#define FRAME_MAX (16 * 1024)          /* a client frame's payload */
#define IN_MAX (FRAME_MAX + 14)         /* one whole client frame */
#define TO_PTY_MAX (32 * 1024)          /* keystrokes not yet taken by the terminal */
#define READ_MAX (16 * 1024)            /* one read of the terminal, one frame */
#define OUT_MAX (64 * 1024 + READ_MAX)  /* frames to the client not yet sent */
#define RATE_BURST (256 * 1024)
#define CLOSE_FLUSH_MS 2000             /* a closing frame's last chance to go out */

enum shell_end { RUNNING, CLIENT_GONE, CLIENT_CLOSED, SHELL_ENDED, PROTOCOL_BROKEN, REVOKED };

struct job_shell {
	struct app *app;
	struct job_shell_who who;
	int pty, sock;
	struct MHD_UpgradeResponseHandle *urh;
	uint64_t id; /* its reservation's name */
	bool attached;
	_Atomic bool revoked; /* an account event took it away (job_shell_relay_close) */
	long long reserved_ms;
	unsigned char in[IN_MAX];
	size_t in_len;
	unsigned char to_pty[TO_PTY_MAX];
	size_t to_pty_len;
	unsigned char out[OUT_MAX];
	size_t out_off, out_len;
	bool binary_open; /* a fragmented binary message is under way */
	double tokens;    /* bytes the shell may still send now */
	long long refill_ms;
	enum shell_end end;
	long long closing_until_ms; /* 0, or when a close frame stops waiting to go */
	struct job_shell *next;
};

#define STOP_WAIT_MS 3000 /* labd-web's stop waits this long for its shells to close */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct job_shell *shells; /* reserved and attached, under lock */
static _Atomic bool stopping;    /* labd-web stops, no shell opens (set under lock) */
static uint64_t last_id;         /* under lock */

/* The unattached reservation id (attached too when any), or NULL; under lock. */
static struct job_shell *find_locked(uint64_t id, bool any)
{
	for (struct job_shell *s = shells; s; s = s->next)
		if (s->id == id && (any || !s->attached))
			return s;
	return NULL;
}

/* Pending opens whose client never took the upgrade: their terminals close. */
static void sweep_pending_locked(long long now)
{
	for (struct job_shell **pp = &shells; *pp;) {
		struct job_shell *s = *pp;
		if (!s->attached && now - s->reserved_ms > JOB_SHELL_PENDING_MS) {
			*pp = s->next;
			if (s->pty >= 0)
				close(s->pty);
			free(s);
			continue;
		}
		pp = &s->next;
	}
}

uint64_t job_shell_relay_reserve(struct app *app, const struct job_shell_who *who)
{
	struct job_shell *s;
	uint64_t id = 0;
	int all = 0, ours = 0;

	pthread_mutex_lock(&lock);
	sweep_pending_locked(clock_ms());
	for (s = shells; s; s = s->next) {
		all++;
		ours += s->who.job_id == who->job_id;
	}
	s = NULL;
	if (!stopping && all < JOB_SHELLS_MAX && ours < JOB_SHELLS_PER_JOB && (s = calloc(1, sizeof(*s)))) {
		s->app = app;
		s->who = *who;
		s->pty = s->sock = -1;
		s->reserved_ms = clock_ms();
		s->id = id = ++last_id;
		s->next = shells;
		shells = s;
	}
	pthread_mutex_unlock(&lock);
	return id;
}

int job_shell_relay_set_pty(uint64_t id, int pty)
{
	struct job_shell *s;

	pthread_mutex_lock(&lock);
	if ((s = find_locked(id, false)))
		s->pty = pty;
	pthread_mutex_unlock(&lock);
	if (!s)
		close(pty);
	return s ? 0 : -ENOENT;
}

static void unlist(struct job_shell *s)
{
	pthread_mutex_lock(&lock);
	for (struct job_shell **pp = &shells; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	pthread_mutex_unlock(&lock);
}

/* Takes the unattached reservation id off the list; NULL when it is gone. */
static struct job_shell *take(uint64_t id)
{
	struct job_shell *s;

	pthread_mutex_lock(&lock);
	if ((s = find_locked(id, false)))
		for (struct job_shell **pp = &shells; *pp; pp = &(*pp)->next)
			if (*pp == s) {
				*pp = s->next;
				break;
			}
	pthread_mutex_unlock(&lock);
	return s;
}

static void release(struct job_shell *s)
{
	if (s->pty >= 0)
		close(s->pty);
	free(s);
}

void job_shell_relay_cancel(uint64_t id)
{
	struct job_shell *s = take(id);

	if (s)
		release(s);
}

/* ---- frames ---- */

/* Appends one unmasked frame; false when out has no room (the caller waits). */
static bool put_frame(struct job_shell *s, unsigned op, const void *data, size_t n)
{
	unsigned char head[10];
	size_t h = 0;

	if (s->out_off > 0 && s->out_off == s->out_len)
		s->out_off = s->out_len = 0;
	head[h++] = (unsigned char)(0x80 | op);
	if (n < 126) {
		head[h++] = (unsigned char)n;
	} else if (n <= 0xFFFF) {
		head[h++] = 126;
		head[h++] = (unsigned char)(n >> 8);
		head[h++] = (unsigned char)n;
	} else {
		head[h++] = 127;
		for (int i = 7; i >= 0; i--)
			head[h++] = (unsigned char)((uint64_t)n >> (8 * i));
	}
	if (s->out_off > 0) { /* keep what is left at the front */
		memmove(s->out, s->out + s->out_off, s->out_len - s->out_off);
		s->out_len -= s->out_off;
		s->out_off = 0;
	}
	if (OUT_MAX - s->out_len < h + n)
		return false;
	memcpy(s->out + s->out_len, head, h);
	memcpy(s->out + s->out_len + h, data, n);
	s->out_len += h + n;
	return true;
}

/* A close frame with code and reason, then the shell ends once it is sent. */
static void close_with(struct job_shell *s, enum shell_end why, unsigned code, const char *reason)
{
	unsigned char p[2 + 100];
	size_t rl = strnlen(reason, sizeof(p) - 2);

	if (s->end != RUNNING)
		return;
	s->end = why;
	p[0] = (unsigned char)(code >> 8);
	p[1] = (unsigned char)code;
	memcpy(p + 2, reason, rl);
	s->out_off = s->out_len = 0; /* what the shell said last is dropped for the close */
	put_frame(s, 0x8, p, 2 + rl);
	s->closing_until_ms = clock_ms() + CLOSE_FLUSH_MS;
}

/* {"type":"resize","cols":C,"rows":R}; anything else is ignored (a later
 * release may add messages). */
static void on_control(struct job_shell *s, const unsigned char *p, size_t n)
{
	json_t *m = json_loadb((const char *)p, n, 0, NULL);
	json_int_t cols = json_integer_value(json_object_get(m, "cols")),
		   rows = json_integer_value(json_object_get(m, "rows"));
	const char *type = json_string_value(json_object_get(m, "type"));

	if (type && strcmp(type, "resize") == 0 && cols >= 1 && cols <= 1000 && rows >= 1 &&
	    rows <= 1000) {
		struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
		/* the kernel tells the shell (SIGWINCH); a shell on another host is a
		 * connection, not a terminal: its backend sets the size there */
		if (ioctl(s->pty, TIOCSWINSZ, &ws) < 0 && errno == ENOTTY &&
		    jobs_shell_resize(s->app, s->pty, (int)cols, (int)rows) < 0)
			log_warn("job %lld: its shell's terminal was not resized",
				 (long long)s->who.job_id);
	}
	json_decref(m);
}

/* The header of the client frame at s->in: 0 and its fields when whole, 1 when
 * more bytes are needed, -1 (closed) when it breaks the rules. */
static int parse_head(struct job_shell *s, unsigned *op, bool *fin, size_t *hlen, uint64_t *len)
{
	const unsigned char *b = s->in;
	size_t need = 2;

	if (s->in_len < 2)
		return 1;
	*fin = b[0] & 0x80;
	*op = b[0] & 0x0F;
	*len = b[1] & 0x7F;
	if (!(b[1] & 0x80) || (b[0] & 0x70)) {
		close_with(s, PROTOCOL_BROKEN, 1002, "client frames must be masked, without extensions");
		return -1;
	}
	need += *len == 126 ? 2 : *len == 127 ? 8 : 0;
	if (s->in_len < need + 4)
		return 1;
	if (*len == 126)
		*len = (uint64_t)b[2] << 8 | b[3];
	else if (*len == 127)
		for (int i = 0; i < 8; i++)
			*len = (i ? *len << 8 : 0) | b[2 + i];
	if (*len > FRAME_MAX || (*op >= 0x8 && (*len > 125 || !*fin))) {
		close_with(s, PROTOCOL_BROKEN, 1009, "frame too large");
		return -1;
	}
	*hlen = need + 4;
	return 0;
}

/* One whole client frame, unmasked in place: false when it must wait (the
 * terminal's buffer is full) or the shell ends. */
static bool take_frame(struct job_shell *s)
{
	unsigned op;
	bool fin;
	size_t hlen;
	uint64_t len;
	int rc = parse_head(s, &op, &fin, &hlen, &len);

	if (rc != 0 || s->in_len < hlen + len)
		return false;
	unsigned char *mask = s->in + hlen - 4, *p = s->in + hlen;
	bool data = op == 0x2 || (op == 0x0 && s->binary_open);
	if (data && TO_PTY_MAX - s->to_pty_len < len)
		return false; /* back-pressure: the terminal takes it first */
	for (uint64_t i = 0; i < len; i++)
		p[i] ^= mask[i % 4];
	if (data) {
		memcpy(s->to_pty + s->to_pty_len, p, len);
		s->to_pty_len += len;
		s->binary_open = !fin;
	} else if (op == 0x1 && fin) {
		on_control(s, p, len);
	} else if (op == 0x9) {
		if (!put_frame(s, 0xA, p, len))
			return false;
	} else if (op == 0x8) {
		close_with(s, CLIENT_CLOSED, 1000, "");
		return false;
	} else if (op != 0xA) {
		close_with(s, PROTOCOL_BROKEN, 1003, "send keystrokes as binary frames");
		return false;
	}
	memmove(s->in, s->in + hlen + len, s->in_len - hlen - len);
	s->in_len -= hlen + len;
	return true;
}

/* Its access ended: an account event (1008), or labd-web stops (1001). */
static void end_access(struct job_shell *s)
{
	if (stopping)
		close_with(s, REVOKED, 1001, "labd is stopping");
	else
		close_with(s, REVOKED, 1008, "your access to this shell ended");
}

/* ---- the loop ---- */

static void refill(struct job_shell *s, long long now)
{
	s->tokens += (double)(now - s->refill_ms) * JOB_SHELL_RATE_BYTES_PER_S / 1000.0;
	if (s->tokens > RATE_BURST)
		s->tokens = RATE_BURST;
	s->refill_ms = now;
}

static void read_client(struct job_shell *s)
{
	ssize_t n = read(s->sock, s->in + s->in_len, IN_MAX - s->in_len);

	if (n == 0 && s->revoked) { /* its reading half was shut down to wake us */
		end_access(s);
		return;
	}
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		s->end = CLIENT_GONE;
		return;
	}
	if (n > 0)
		s->in_len += (size_t)n;
	while (s->end == RUNNING && take_frame(s))
		;
}

static void read_pty(struct job_shell *s)
{
	unsigned char buf[READ_MAX];
	size_t want = s->tokens < READ_MAX ? (size_t)s->tokens : READ_MAX;
	ssize_t n = want ? read(s->pty, buf, want) : 0;

	if (want && (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))) {
		/* EIO: every holder of the terminal is gone (the shell exited, or the
		 * job ended and its processes with it) */
		close_with(s, SHELL_ENDED, 1000, "the shell ended");
		return;
	}
	if (n > 0 && put_frame(s, 0x2, buf, (size_t)n))
		s->tokens -= (double)n;
}

static void write_side(int fd, unsigned char *buf, size_t *off, size_t *len, bool *broken)
{
	ssize_t n = write(fd, buf + *off, *len - *off);

	if (n < 0 && errno != EAGAIN && errno != EINTR) {
		*broken = true;
		return;
	}
	if (n > 0)
		*off += (size_t)n;
	if (*off == *len)
		*off = *len = 0;
}

static void write_pty(struct job_shell *s)
{
	size_t off = 0;
	bool broken = false;

	write_side(s->pty, s->to_pty, &off, &s->to_pty_len, &broken);
	if (off > 0) {
		memmove(s->to_pty, s->to_pty + off, s->to_pty_len - off);
		s->to_pty_len -= off;
	}
	if (broken)
		close_with(s, SHELL_ENDED, 1000, "the shell ended");
	while (s->end == RUNNING && take_frame(s)) /* frames that waited for room */
		;
}

static int poll_timeout(const struct job_shell *s, long long now)
{
	if (s->end != RUNNING)
		return (int)(s->closing_until_ms > now ? s->closing_until_ms - now : 0);
	return s->tokens < 1 ? 10 : -1;
}

/* One turn; false once the shell is over. */
static bool turn(struct job_shell *s)
{
	long long now = clock_ms();
	bool room_out = OUT_MAX - s->out_len >= READ_MAX + 10 || s->out_off == s->out_len;
	struct pollfd p[2] = {
		{s->sock, (short)((s->end == RUNNING && s->in_len < IN_MAX ? POLLIN : 0) |
				  (s->out_len > s->out_off ? POLLOUT : 0)), 0},
		{s->pty, (short)((s->end == RUNNING && room_out && s->tokens >= 1 ? POLLIN : 0) |
				 (s->end == RUNNING && s->to_pty_len ? POLLOUT : 0)), 0},
	};
	bool broken = false;

	if (s->revoked) /* its reading half was shut down to wake us */
		end_access(s);
	if (s->end != RUNNING && (s->out_len == s->out_off || now >= s->closing_until_ms))
		return false;
	if (s->end == CLIENT_GONE)
		return false;
	/* a side asked for nothing is left out: a hung-up terminal whose output has no
	 * room yet must not wake us over and over, nor be read into nowhere */
	for (int i = 0; i < 2; i++)
		if (!p[i].events)
			p[i].fd = -1;
	if (poll(p, 2, poll_timeout(s, now)) < 0 && errno != EINTR)
		return false;
	refill(s, clock_ms());
	if ((p[0].events & POLLIN) && (p[0].revents & (POLLIN | POLLHUP | POLLERR)))
		read_client(s);
	if (s->end == CLIENT_GONE)
		return false;
	if (p[0].revents & (POLLOUT | POLLHUP | POLLERR) && (p[0].events & POLLOUT))
		write_side(s->sock, s->out, &s->out_off, &s->out_len, &broken);
	if (broken)
		return false;
	if ((p[1].events & POLLOUT) && (p[1].revents & (POLLOUT | POLLHUP | POLLERR)))
		write_pty(s);
	if ((p[1].events & POLLIN) && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
		read_pty(s);
	return true;
}

static const char *end_name(enum shell_end e)
{
	return e == CLIENT_CLOSED ? "closed by the client"
	       : e == CLIENT_GONE ? "the client went away"
	       : e == SHELL_ENDED ? "the shell ended"
	       : e == REVOKED	  ? "its access ended (an account event, or labd stops)"
				  : "the client broke the WebSocket protocol";
}

static void *relay_main(void *arg)
{
	struct job_shell *s = arg;
	char detail[256];

	s->refill_ms = clock_ms();
	s->tokens = RATE_BURST;
	while (turn(s))
		;
	/* job_shell_relay_close must not touch its socket from here on */
	pthread_mutex_lock(&lock);
	s->sock = -1;
	pthread_mutex_unlock(&lock);
	/* the master closed: the shell's session gets SIGHUP */
	close(s->pty);
	s->pty = -1;
	MHD_upgrade_action(s->urh, MHD_UPGRADE_ACTION_CLOSE);
	snprintf(detail, sizeof(detail), "job %lld (%s): %s", (long long)s->who.job_id,
		 s->who.job_name, end_name(s->end));
	if (audit_add(s->app->db, time(NULL), s->who.actor, "job.shell.close", s->who.actor,
		      s->who.address, detail) < 0)
		log_error("audit: job.shell.close of %s not recorded", s->who.actor);
	log_info("job %lld: shell of %s closed: %s", (long long)s->who.job_id, s->who.actor,
		 end_name(s->end));
	unlist(s);
	free(s);
	return NULL;
}

static bool in_scope(const struct job_shell_who *w, int what, int64_t id)
{
	switch (what) {
	case APP_CLOSE_USER:
		return w->user_id == id;
	case APP_CLOSE_USER_SESSIONS:
		return w->user_id == id && w->session_id != 0;
	case APP_CLOSE_SESSION:
		return w->session_id == id;
	case APP_CLOSE_TOKEN:
		return w->token_id == id;
	}
	return false;
}

int job_shell_relay_close(int what, int64_t id)
{
	int n = 0;

	pthread_mutex_lock(&lock);
	for (struct job_shell *s = shells; s; s = s->next) {
		if (!s->attached || s->sock < 0 || !in_scope(&s->who, what, id))
			continue;
		s->revoked = true;
		shutdown(s->sock, SHUT_RD); /* wakes its thread: the socket reads as ended */
		n++;
	}
	pthread_mutex_unlock(&lock);
	return n;
}

void job_shell_relay_stop_all(void)
{
	long long until = clock_ms() + STOP_WAIT_MS;
	bool left;

	pthread_mutex_lock(&lock);
	stopping = true;
	sweep_pending_locked(LLONG_MAX / 2); /* every open not yet upgraded goes now */
	for (struct job_shell *s = shells; s; s = s->next) {
		s->revoked = true;
		shutdown(s->sock, SHUT_RD);
	}
	pthread_mutex_unlock(&lock);
	/* their threads write their audit entries: the store must still be open */
	do {
		struct timespec ts = {0, 10 * 1000 * 1000};
		pthread_mutex_lock(&lock);
		left = shells != NULL;
		pthread_mutex_unlock(&lock);
		if (left)
			nanosleep(&ts, NULL);
	} while (left && clock_ms() < until);
	if (left)
		log_warn("job shells: some did not close within %d ms of the stop", STOP_WAIT_MS);
}

void job_shell_relay_attach(uint64_t id, int sock, struct MHD_UpgradeResponseHandle *urh,
			    const char *extra, size_t n_extra)
{
	struct job_shell *s;
	int rc;

	pthread_mutex_lock(&lock);
	s = stopping ? NULL : find_locked(id, false);
	if (s) /* from here on its thread owns it; nothing else frees it */
		s->attached = true;
	pthread_mutex_unlock(&lock);
	if (!s) { /* given up meanwhile (too late, or labd-web stops) */
		job_shell_relay_cancel(id);
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		return;
	}
	s->sock = sock;
	s->urh = urh;
	fcntl(sock, F_SETFL, fcntl(sock, F_GETFL) | O_NONBLOCK);
	fcntl(s->pty, F_SETFL, fcntl(s->pty, F_GETFL) | O_NONBLOCK);
	if (n_extra > IN_MAX)
		n_extra = 0; /* never: a client that sent more before the 101 is cut short */
	memcpy(s->in, extra, n_extra);
	s->in_len = n_extra;
	if ((rc = thread_detached(relay_main, s, 256 * 1024)) != 0) {
		log_error("job %lld: no thread for its shell: %s", (long long)s->who.job_id,
			  strerror(rc));
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		unlist(s);
		release(s);
	}
}
