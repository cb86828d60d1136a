/* labd.c - labd's own metrics and their rendering; see labd.h. */
#include "metrics/labd.h"

#include <time.h>

#include "metrics/metrics.h"

#define CLASSES 5 /* 1xx..5xx */

/* Proxied requests: a Jupyter answer comes in well under a millisecond over
 * its Unix socket, a notebook save or a large download takes seconds. */
static const int64_t proxy_bounds_us[] = {100,    250,     500,     1000,    2500,   5000,
					  10000,  25000,   50000,   100000,  250000, 500000,
					  1000000, 2500000, 5000000, 10000000};
/* Runtime starts: seconds (created_at has a one-second resolution); a cold
 * image and a loop-mounted home take from about a second to a minute. */
static const int64_t start_bounds_s[] = {1, 2, 3, 5, 10, 15, 20, 30, 45, 60, 90, 120, 300};
static const int64_t queue_bounds_s[] = {1, 10, 30, 60, 300, 600, 1800, 3600, 7200, 14400};

static struct {
	struct metrics_gauge start_time_s;
	struct metrics_counter proxy_requests[CLASSES];
	struct metrics_histogram proxy_duration[CLASSES];
	struct metrics_gauge websockets;
	struct metrics_counter login_failures;
	struct metrics_histogram start_duration;
	struct metrics_gauge supervisor_up;
	struct metrics_gauge gpus_total, gpus_allocated, queue_waiting;
	struct metrics_histogram queue_wait;
	struct metrics_counter ledger_s[METRICS_LEDGER_KINDS];
} m = {
	.proxy_duration = {METRICS_HISTOGRAM(proxy_bounds_us, 1e6),
			   METRICS_HISTOGRAM(proxy_bounds_us, 1e6),
			   METRICS_HISTOGRAM(proxy_bounds_us, 1e6),
			   METRICS_HISTOGRAM(proxy_bounds_us, 1e6),
			   METRICS_HISTOGRAM(proxy_bounds_us, 1e6)},
	.start_duration = METRICS_HISTOGRAM(start_bounds_s, 1),
	.queue_wait = METRICS_HISTOGRAM(queue_bounds_s, 1),
};

static const char *const class_names[CLASSES] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
static const char *const ledger_names[METRICS_LEDGER_KINDS] = {"cpu", "gpu"};

void metrics_process_started(void)
{
	metrics_gauge_set(&m.start_time_s, (int64_t)time(NULL));
}

void metrics_proxy_request(unsigned status, int64_t elapsed_us)
{
	unsigned c = status >= 100 && status < 600 ? status / 100 - 1 : CLASSES - 1;

	if (status == 0)
		return; /* the client left before any reply: not the runtime's answer */
	metrics_add(&m.proxy_requests[c], 1);
	metrics_observe(&m.proxy_duration[c], elapsed_us);
}

void metrics_websockets_add(int delta)
{
	metrics_gauge_add(&m.websockets, delta);
}

void metrics_login_failure(void)
{
	metrics_add(&m.login_failures, 1);
}

void metrics_runtime_ready(int64_t waited_s)
{
	metrics_observe(&m.start_duration, waited_s);
}

void metrics_supervisor_channel(bool up)
{
	metrics_gauge_set(&m.supervisor_up, up);
}

void metrics_gpus_set(int64_t total, int64_t allocated)
{
	metrics_gauge_set(&m.gpus_total, total);
	metrics_gauge_set(&m.gpus_allocated, allocated);
}

void metrics_gpu_queue_set(int64_t waiting)
{
	metrics_gauge_set(&m.queue_waiting, waiting);
}

void metrics_gpu_queue_wait(int64_t waited_s)
{
	metrics_observe(&m.queue_wait, waited_s);
}

void metrics_ledger_set(enum metrics_ledger_kind kind, int64_t total_s)
{
	if (kind >= 0 && kind < METRICS_LEDGER_KINDS && total_s >= 0)
		atomic_store(&m.ledger_s[kind].value, (uint64_t)total_s);
}

static double gauge(struct metrics_gauge *g)
{
	return (double)atomic_load_explicit(&g->value, memory_order_relaxed);
}

static double counter(struct metrics_counter *c)
{
	return (double)atomic_load_explicit(&c->value, memory_order_relaxed);
}

/* A family with one unlabelled sample. */
static int render_single(struct buf *b, const char *name, const char *type, const char *help,
			 double v)
{
	int rc = metrics_render_family(b, name, type, help);
	return rc < 0 ? rc : metrics_render_sample(b, name, NULL, 0, v);
}

static int render_proxy(struct buf *b)
{
	int rc = metrics_render_family(b, "labd_proxy_requests_total", "counter",
				       "Requests proxied to runtimes, by response status class.");

	for (int c = 0; c < CLASSES && rc == 0; c++) {
		struct metrics_label l = {"code", class_names[c]};
		rc = metrics_render_sample(b, "labd_proxy_requests_total", &l, 1,
					   counter(&m.proxy_requests[c]));
	}
	if (rc == 0)
		rc = metrics_render_family(b, "labd_proxy_request_duration_seconds", "histogram",
					   "Time from a proxied request's start to its end, by status class.");
	for (int c = 0; c < CLASSES && rc == 0; c++) {
		struct metrics_label l = {"code", class_names[c]};
		rc = metrics_render_histogram(b, "labd_proxy_request_duration_seconds", &l, 1,
					      &m.proxy_duration[c]);
	}
	return rc;
}

static int render_runtime(struct buf *b)
{
	int rc = metrics_render_family(b, "labd_runtime_start_duration_seconds", "histogram",
				       "Time from a runtime's start request until it was ready.");
	if (rc == 0)
		rc = metrics_render_histogram(b, "labd_runtime_start_duration_seconds", NULL, 0,
					      &m.start_duration);
	if (rc == 0)
		rc = render_single(b, "labd_websocket_relays", "gauge",
				   "WebSocket connections relayed to runtimes now.", gauge(&m.websockets));
	if (rc == 0)
		rc = render_single(b, "labd_login_failures_total", "counter",
				   "Refused login attempts (wrong password, unknown or disabled user).",
				   counter(&m.login_failures));
	if (rc == 0)
		rc = render_single(b, "labd_supervisor_channel_up", "gauge",
				   "1 while the channel to the root supervisor is up, else 0.",
				   gauge(&m.supervisor_up));
	return rc;
}

/* Filled by the GPU queue and the ledger once they exist (labd.h). */
static int render_hooks(struct buf *b)
{
	int rc = render_single(b, "labd_gpus", "gauge", "GPUs in the pool.", gauge(&m.gpus_total));

	if (rc == 0)
		rc = render_single(b, "labd_gpus_allocated", "gauge",
				   "GPUs allocated to runtimes now.", gauge(&m.gpus_allocated));
	if (rc == 0)
		rc = render_single(b, "labd_gpu_queue_length", "gauge",
				   "Runtime starts waiting for a GPU now.", gauge(&m.queue_waiting));
	if (rc == 0)
		rc = metrics_render_family(b, "labd_gpu_queue_wait_seconds", "histogram",
					   "Time a start waited in the GPU queue.");
	if (rc == 0)
		rc = metrics_render_histogram(b, "labd_gpu_queue_wait_seconds", NULL, 0, &m.queue_wait);
	if (rc == 0)
		rc = metrics_render_family(b, "labd_ledger_seconds_total", "counter",
					   "Runtime seconds recorded in the usage ledger, by kind.");
	for (int k = 0; k < METRICS_LEDGER_KINDS && rc == 0; k++) {
		struct metrics_label l = {"kind", ledger_names[k]};
		rc = metrics_render_sample(b, "labd_ledger_seconds_total", &l, 1, counter(&m.ledger_s[k]));
	}
	return rc;
}

int metrics_render_labd(struct buf *b)
{
	int rc = render_single(b, "process_start_time_seconds", "gauge",
			       "Start time of the process since the Unix epoch in seconds.",
			       gauge(&m.start_time_s));

	if (rc == 0)
		rc = render_proxy(b);
	if (rc == 0)
		rc = render_runtime(b);
	return rc < 0 ? rc : render_hooks(b);
}

void metrics_labd_clear(void)
{
	struct metrics_gauge *gauges[] = {&m.start_time_s, &m.websockets,     &m.supervisor_up,
					  &m.gpus_total,   &m.gpus_allocated, &m.queue_waiting};
	for (size_t i = 0; i < sizeof(gauges) / sizeof(gauges[0]); i++)
		metrics_gauge_set(gauges[i], 0);
	for (int c = 0; c < CLASSES; c++) {
		atomic_store(&m.proxy_requests[c].value, 0);
		metrics_histogram_clear(&m.proxy_duration[c]);
	}
	for (int k = 0; k < METRICS_LEDGER_KINDS; k++)
		atomic_store(&m.ledger_s[k].value, 0);
	atomic_store(&m.login_failures.value, 0);
	metrics_histogram_clear(&m.start_duration);
	metrics_histogram_clear(&m.queue_wait);
}
