/* Unit tests: metric primitives and the Prometheus text renderer (server/metrics/). */
#include "unit.h"

#include <errno.h>
#include <math.h>

#include "metrics/labd.h"
#include "metrics/metrics.h"

#define OUT_MAX (64 * 1024)

static void test_family_lines(void **state)
{
	struct buf b;
	(void)state;
	buf_init(&b, OUT_MAX);
	assert_int_equal(metrics_render_family(&b, "x_total", "counter", "Line one\nback\\slash \"q\""), 0);
	/* HELP escapes backslash and newline only; a quote stays as it is. */
	assert_string_equal(buf_str(&b), "# HELP x_total Line one\\nback\\\\slash \"q\"\n"
					 "# TYPE x_total counter\n");
	buf_release(&b);
}

static void test_bad_names_and_types_refused(void **state)
{
	struct buf b;
	struct metrics_label bad[] = {{"1x", "v"}}, reserved[] = {{"__name__", "v"}},
			     colon[] = {{"a:b", "v"}};
	(void)state;
	buf_init(&b, OUT_MAX);
	assert_true(metrics_name_ok("labd:x_total"));
	assert_false(metrics_name_ok("9lives"));
	assert_false(metrics_name_ok("a-b"));
	assert_false(metrics_name_ok(""));
	assert_int_equal(metrics_render_family(&b, "a-b", "counter", "h"), -EINVAL);
	assert_int_equal(metrics_render_family(&b, "ok", "summary", "h"), -EINVAL);
	assert_int_equal(metrics_render_sample(&b, "ok", bad, 1, 1), -EINVAL);
	assert_int_equal(metrics_render_sample(&b, "ok", reserved, 1, 1), -EINVAL);
	assert_int_equal(metrics_render_sample(&b, "ok", colon, 1, 1), -EINVAL);
	buf_release(&b);
}

static void test_label_values_escaped(void **state)
{
	struct buf b;
	struct metrics_label l[] = {{"path", "a\"b\\c\nd"}, {"k", ""}};
	(void)state;
	buf_init(&b, OUT_MAX);
	assert_int_equal(metrics_render_sample(&b, "m", l, 2, 3), 0);
	assert_string_equal(buf_str(&b), "m{path=\"a\\\"b\\\\c\\nd\",k=\"\"} 3\n");
	buf_release(&b);
}

static void test_numbers(void **state)
{
	struct buf b;
	(void)state;
	buf_init(&b, OUT_MAX);
	assert_int_equal(metrics_render_sample(&b, "a", NULL, 0, 0.005), 0);
	assert_int_equal(metrics_render_sample(&b, "b", NULL, 0, 1764000000), 0);
	assert_int_equal(metrics_render_sample(&b, "c", NULL, 0, INFINITY), 0);
	assert_int_equal(metrics_render_sample(&b, "d", NULL, 0, NAN), 0);
	assert_int_equal(metrics_render_sample(&b, "e", NULL, 0, 0.1 + 0.2), 0);
	/* 0.1 + 0.2 is not 0.3: the longer form keeps it exact */
	assert_string_equal(buf_str(&b), "a 0.005\nb 1764000000\nc +Inf\nd NaN\n"
					 "e 0.30000000000000004\n");
	buf_release(&b);
}

static const int64_t bounds_us[] = {1000, 5000, 250000};

static void test_histogram_cumulative(void **state)
{
	struct metrics_histogram h = METRICS_HISTOGRAM(bounds_us, 1e6);
	struct metrics_label l = {"code", "2xx"};
	struct buf b;
	(void)state;
	metrics_observe(&h, 1000); /* on a bound: that bucket (le is inclusive) */
	metrics_observe(&h, 1001);
	metrics_observe(&h, 4000);
	metrics_observe(&h, 9000000); /* past every bound: +Inf only */
	buf_init(&b, OUT_MAX);
	assert_int_equal(metrics_render_histogram(&b, "req_seconds", &l, 1, &h), 0);
	assert_string_equal(buf_str(&b), "req_seconds_bucket{code=\"2xx\",le=\"0.001\"} 1\n"
					 "req_seconds_bucket{code=\"2xx\",le=\"0.005\"} 3\n"
					 "req_seconds_bucket{code=\"2xx\",le=\"0.25\"} 3\n"
					 "req_seconds_bucket{code=\"2xx\",le=\"+Inf\"} 4\n"
					 "req_seconds_sum{code=\"2xx\"} 9.006001\n"
					 "req_seconds_count{code=\"2xx\"} 4\n");
	metrics_histogram_clear(&h);
	buf_clear(&b);
	assert_int_equal(metrics_render_histogram(&b, "h", NULL, 0, &h), 0);
	assert_non_null(strstr(buf_str(&b), "h_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n"));
	buf_release(&b);
}

static void test_full_buffer_reports(void **state)
{
	struct buf b;
	(void)state;
	buf_init(&b, 64);
	assert_int_equal(metrics_render_labd(&b), -EMSGSIZE);
	buf_release(&b);
}

/* The labd catalogue: each hook moves its own series and nothing else. */
static void test_labd_hooks(void **state)
{
	struct buf b;
	(void)state;
	metrics_labd_clear();
	metrics_proxy_request(204, 300);
	metrics_proxy_request(502, 2000);
	metrics_proxy_request(99, 10); /* nonsense status: counted as 5xx */
	metrics_proxy_request(0, 10);  /* the client left before a reply: not counted */
	metrics_login_failure();
	metrics_websockets_add(1);
	metrics_websockets_add(1);
	metrics_websockets_add(-1);
	metrics_runtime_ready(4);
	metrics_supervisor_channel(true);
	metrics_ledger_set(METRICS_LEDGER_GPU, 60);
	metrics_ledger_set(METRICS_LEDGER_GPU, -5); /* ignored: a ledger never gives back */
	buf_init(&b, OUT_MAX);
	assert_int_equal(metrics_render_labd(&b), 0);
	const char *s = buf_str(&b);
	assert_non_null(strstr(s, "labd_proxy_requests_total{code=\"2xx\"} 1\n"));
	assert_non_null(strstr(s, "labd_proxy_requests_total{code=\"5xx\"} 2\n"));
	assert_non_null(strstr(s, "labd_proxy_requests_total{code=\"1xx\"} 0\n"));
	assert_non_null(strstr(s, "labd_proxy_request_duration_seconds_bucket{code=\"2xx\",le=\"0.0005\"} 1\n"));
	assert_non_null(strstr(s, "labd_proxy_request_duration_seconds_bucket{code=\"5xx\",le=\"0.0025\"} 2\n"));
	assert_non_null(strstr(s, "labd_login_failures_total 1\n"));
	assert_non_null(strstr(s, "labd_websocket_relays 1\n"));
	assert_non_null(strstr(s, "labd_runtime_start_duration_seconds_bucket{le=\"5\"} 1\n"));
	assert_non_null(strstr(s, "labd_runtime_start_duration_seconds_bucket{le=\"3\"} 0\n"));
	assert_non_null(strstr(s, "labd_supervisor_channel_up 1\n"));
	assert_non_null(strstr(s, "labd_ledger_seconds_total{kind=\"gpu\"} 60\n"));
	assert_non_null(strstr(s, "# TYPE labd_gpu_queue_wait_seconds histogram\n"));
	buf_release(&b);
	metrics_labd_clear();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_family_lines),
		cmocka_unit_test(test_bad_names_and_types_refused),
		cmocka_unit_test(test_label_values_escaped),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_histogram_cumulative),
		cmocka_unit_test(test_full_buffer_reports),
		cmocka_unit_test(test_labd_hooks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
