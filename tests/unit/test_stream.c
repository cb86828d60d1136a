/* Unit tests: the event-stream writer (http/stream.c) over a real
 * libmicrohttpd on loopback - framing, suspend/resume without spinning,
 * keepalive, the bounded buffer against a client that stops reading,
 * release exactly once (hang-up, refusal, shutdown). */
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include "config/config.h"
#include "http/http.h"
#include "http/stream.h"
#include "http/workers.h"
#include "labd/app.h"
#include "labd/buf.h"

/* ---- framing (pure) ---- */

static void test_frame_event(void **state)
{
	struct buf b;
	(void)state;
	buf_init(&b, 1024);
	assert_int_equal(http_stream_frame_event(&b, "runtime", "{\"a\":1}", 7), 0);
	assert_string_equal(buf_str(&b), "id: 7\nevent: runtime\ndata: {\"a\":1}\n\n");
	buf_clear(&b);
	/* every line break a client splits at becomes its own data line */
	assert_int_equal(http_stream_frame_event(&b, NULL, "a\nb\r\nc\rd", 0), 0);
	assert_string_equal(buf_str(&b), "data: a\ndata: b\ndata: c\ndata: d\n\n");
	buf_clear(&b);
	assert_int_equal(http_stream_frame_event(&b, "x", NULL, 0), 0);
	assert_string_equal(buf_str(&b), "event: x\ndata: \n\n");
	buf_clear(&b);
	/* an event name cannot smuggle in a field */
	assert_int_equal(http_stream_frame_event(&b, "x\ndata: evil", "d", 1), -EINVAL);
	assert_int_equal(b.len, 0);
	buf_release(&b);
	/* a frame that does not fit leaves the buffer as it was */
	buf_init(&b, 24);
	assert_int_equal(buf_add(&b, "keep", 4), 0);
	assert_int_equal(http_stream_frame_event(&b, "runtime", "0123456789", 1), -EMSGSIZE);
	assert_string_equal(buf_str(&b), "keep");
	buf_release(&b);
}

/* ---- a real server ---- */

#define KEEPALIVE_MS 100
#define SMALL_MAX_BYTES (16 * 1024)

static struct labd_config cfg;
static struct app app;
static struct workers *httpd;
static int port;
static struct http_streams *hub;       /* what the handler opens streams in */
static struct http_streams *hubs[4];   /* all made, freed after the server */
static size_t nhubs;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct http_stream *opened; /* the handler's last stream, for the test */
static int closes;                 /* on_close calls */

static void count_close(void *ctx)
{
	(void)ctx;
	pthread_mutex_lock(&lock);
	closes++;
	pthread_mutex_unlock(&lock);
}

/* GET /stream opens a stream; /refuse opens one, then replies 429 instead
 * (as the API does when a user has too many). */
static void handler(struct http_request *req)
{
	struct http_stream *s =
		http_stream_open(req, hub, "text/event-stream", SMALL_MAX_BYTES, count_close, NULL);
	if (!s)
		return;
	if (strcmp(http_path(req), "/refuse") == 0) {
		http_stream_unref(s);
		http_reply_error(req, 429, "too_many_streams", "refused");
		return;
	}
	pthread_mutex_lock(&lock);
	opened = s;
	pthread_mutex_unlock(&lock);
}

static const struct http_handler handlers[] = {{.prefix = "/", .on_request = handler}};

static struct http_streams *new_hub(unsigned keepalive_ms, size_t max)
{
	struct http_streams *h = http_streams_new(keepalive_ms, max);
	assert_non_null(h);
	assert_true(nhubs < 4);
	hubs[nhubs++] = h;
	return h;
}

static int server_up(void **state)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	(void)state;

	config_defaults(&cfg, false);
	cfg.threads = 2;
	app.cfg = &cfg;
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		return -1;
	port = ntohs(sa.sin_port);
	hub = http_streams_new(KEEPALIVE_MS, 16);
	hubs[nhubs++] = hub;
	httpd = http_start(&app, fd, handlers, 1);
	return httpd && hub ? 0 : -1;
}

static int server_down(void **state)
{
	(void)state;
	for (size_t i = 0; i < nhubs; i++)
		http_streams_close_all(hubs[i]);
	workers_stop(httpd);
	for (size_t i = 0; i < nhubs; i++)
		http_streams_free(hubs[i]);
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Connects (with a receive buffer of rcvbuf bytes when not 0) and sends GET path. */
static int client(const char *path, int rcvbuf)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	char req[128];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	if (rcvbuf)
		assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path);
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	return fd;
}

/* Reads into got (NUL-terminated, at most size-1 bytes kept) until needle
 * shows up, EOF or timeout_ms; true when found. */
static bool read_until(int fd, const char *needle, char *got, size_t size, int timeout_ms)
{
	size_t len = strlen(got);
	int64_t end = now_ms() + timeout_ms;

	while (!strstr(got, needle)) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int64_t left = end - now_ms();
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return false;
		if (len + 1 >= size) { /* keep the tail: the needle may straddle */
			memmove(got, got + size / 2, len - size / 2 + 1);
			len -= size / 2;
		}
		ssize_t n = read(fd, got + len, size - 1 - len);
		if (n <= 0)
			return false;
		len += (size_t)n;
		got[len] = '\0';
	}
	return true;
}

/* The stream the handler opened for the last request (our reference). */
static struct http_stream *take_opened(void)
{
	int64_t end = now_ms() + 2000;
	struct http_stream *s = NULL;

	while (!s && now_ms() < end) {
		pthread_mutex_lock(&lock);
		s = opened;
		opened = NULL;
		pthread_mutex_unlock(&lock);
		if (!s)
			usleep(1000);
	}
	assert_non_null(s);
	return s;
}

static int closes_now(void)
{
	pthread_mutex_lock(&lock);
	int n = closes;
	pthread_mutex_unlock(&lock);
	return n;
}

static bool wait_closes(int want, int timeout_ms)
{
	int64_t end = now_ms() + timeout_ms;
	while (closes_now() < want && now_ms() < end)
		usleep(1000);
	return closes_now() == want;
}

static int64_t cpu_ms(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

static void test_events_reach_client_without_spinning(void **state)
{
	char got[4096] = "";
	int before = closes_now();
	int fd = client("/stream", 0);
	struct http_stream *s = take_opened();
	int64_t cpu;
	(void)state;

	assert_true(read_until(fd, "\r\n\r\n", got, sizeof(got), 2000));
	assert_non_null(strstr(got, "HTTP/1.1 200"));
	assert_non_null(strstr(got, "Content-Type: text/event-stream"));
	assert_non_null(strstr(got, "Cache-Control: no-store"));
	assert_non_null(strstr(got, "X-Accel-Buffering: no"));
	/* Nothing to send: the connection is parked, not polled in a loop
	 * (a spinning worker would burn ~300 ms of CPU here). */
	cpu = cpu_ms();
	usleep(300 * 1000);
	assert_true(cpu_ms() - cpu < 60);
	/* A write from this (foreign) thread resumes it. */
	assert_int_equal(http_stream_event(s, "runtime", "{\"state\":\"running\"}", 1), 0);
	assert_true(read_until(fd, "event: runtime\ndata: {\"state\":\"running\"}\n\n", got,
			       sizeof(got), 2000));
	/* close: the client gets the end of the chunked body */
	http_stream_close(s);
	assert_true(read_until(fd, "0\r\n\r\n", got, sizeof(got), 2000));
	assert_int_equal(http_stream_write(s, "x", 1), -EPIPE);
	close(fd);
	assert_true(wait_closes(before + 1, 2000));
	http_stream_unref(s);
}

static void test_keepalive_pings(void **state)
{
	char got[4096] = "";
	int before = closes_now();
	int fd = client("/stream", 0);
	struct http_stream *s = take_opened();
	(void)state;

	assert_true(read_until(fd, ": ping\n\n", got, sizeof(got), 20 * KEEPALIVE_MS));
	close(fd);
	assert_true(wait_closes(before + 1, 2000));
	http_stream_unref(s);
}

/* A client that stops reading: what it does not take piles up first in the
 * kernel's socket buffers, then in the stream's buffer up to its maximum;
 * the write that would pass it fails and ends the stream. */
static void test_slow_client_is_bounded(void **state)
{
	char event[1024], got[4096] = "";
	int before = closes_now();
	int fd = client("/stream", 4096);
	struct http_stream *s = take_opened();
	size_t written = 0, most = 0;
	int rc = 0;
	(void)state;

	assert_true(read_until(fd, "\r\n\r\n", got, sizeof(got), 2000));
	memset(event, 'x', sizeof(event) - 1);
	event[sizeof(event) - 1] = '\0';
	while (written < 64 * 1024 * 1024) {
		if ((rc = http_stream_event(s, "e", event, 0)) < 0)
			break;
		written += sizeof(event);
		size_t held = http_stream_held_bytes(s);
		most = held > most ? held : most;
		if (held > SMALL_MAX_BYTES / 2)
			usleep(1000); /* let the worker fill the socket meanwhile */
	}
	assert_int_equal(rc, -EMSGSIZE);
	/* the stream's buffer, the kernel's (its send buffer is fixed small)
	 * and the client's 4 KiB: some 50 KiB in all */
	assert_true(written < 256 * 1024);
	assert_true(most <= SMALL_MAX_BYTES);
	assert_true(http_stream_held_bytes(s) <= SMALL_MAX_BYTES);
	assert_int_equal(http_stream_event(s, "e", "more", 0), -EPIPE);
	/* The failed stream ends with an error at once rather than waiting for
	 * the client (or a timeout): released without the client's help. */
	assert_true(wait_closes(before + 1, 2000));
	close(fd);
	http_stream_unref(s);
}

/* A suspended connection is not watched by libmicrohttpd: a client that
 * hangs up is noticed by the hub's watch, long before any ping. */
static void test_hangup_releases_at_once(void **state)
{
	struct http_streams *saved = hub;
	char got[4096] = "";
	int before = closes_now();
	int fd;
	struct http_stream *s;
	int64_t t0;
	(void)state;

	hub = new_hub(3600 * 1000, 16);
	fd = client("/stream", 0);
	s = take_opened();
	assert_true(read_until(fd, "\r\n\r\n", got, sizeof(got), 2000));
	usleep(50 * 1000); /* parked by now */
	assert_int_equal(http_streams_count(hub), 1);
	t0 = now_ms();
	close(fd);
	assert_true(wait_closes(before + 1, 2000));
	assert_true(now_ms() - t0 < 1000);
	assert_int_equal(http_streams_count(hub), 0);
	assert_int_equal(http_stream_write(s, "x", 1), -EPIPE);
	http_stream_unref(s);
	hub = saved;
}

/* A reply that replaces the stream releases it there and then, once. */
static void test_refused_stream_released_once(void **state)
{
	char got[4096] = "";
	int before = closes_now();
	int fd = client("/refuse", 0);
	(void)state;

	assert_true(read_until(fd, "too_many_streams", got, sizeof(got), 2000));
	assert_non_null(strstr(got, "HTTP/1.1 429"));
	close(fd);
	assert_true(wait_closes(before + 1, 2000));
	usleep(50 * 1000);
	assert_int_equal(closes_now(), before + 1);
}

static void test_full_hub_and_shutdown(void **state)
{
	struct http_streams *saved = hub;
	char got[4096] = "", second[4096] = "";
	int before = closes_now();
	int fd, fd2;
	struct http_stream *s;
	(void)state;

	hub = new_hub(3600 * 1000, 1);
	fd = client("/stream", 0);
	s = take_opened();
	assert_int_equal(http_stream_write(s, "data: last\n\n", 12), 0);
	fd2 = client("/stream", 0);
	assert_true(read_until(fd2, "too_many_streams", second, sizeof(second), 2000));
	assert_non_null(strstr(second, "HTTP/1.1 503"));
	assert_non_null(strstr(second, "Retry-After: "));
	close(fd2);
	/* Shutdown ends every stream after what was written; nothing new opens. */
	http_streams_close_all(hub);
	assert_true(read_until(fd, "data: last\n\n", got, sizeof(got), 2000));
	assert_true(read_until(fd, "0\r\n\r\n", got, sizeof(got), 2000));
	fd2 = client("/stream", 0);
	second[0] = '\0';
	assert_true(read_until(fd2, "shutting_down", second, sizeof(second), 2000));
	close(fd2);
	close(fd);
	assert_true(wait_closes(before + 1, 2000));
	http_stream_unref(s);
	hub = saved;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frame_event),
		cmocka_unit_test(test_events_reach_client_without_spinning),
		cmocka_unit_test(test_keepalive_pings),
		cmocka_unit_test(test_slow_client_is_bounded),
		cmocka_unit_test(test_hangup_releases_at_once),
		cmocka_unit_test(test_refused_stream_released_once),
		cmocka_unit_test(test_full_hub_and_shutdown),
	};
	return cmocka_run_group_tests_name("stream", tests, server_up, server_down);
}
