/* Unit tests of notifications: the signature (notify/sign.c, against a value
 * Python's hmac module computed), the URL and address checks (notify/target.c)
 * and the delivery rows (store/webhooks.c: once per key, the pending bound,
 * attempts and the trimmed log). */
#include "unit.h"

#include <errno.h>
#include <string.h>

#include "notify/sign.h"
#include "notify/target.h"
#include "store_fixture.h"
#include "store/webhooks.h"

static void test_sign_matches_python_hmac(void **state)
{
	char sig[NOTIFY_SIGNATURE_HEX + 1];

	(void)state;
	/* hmac.new(b"whsec_test-secret-0123", b'1700000000.{"a":1}', sha256).hexdigest() */
	assert_int_equal(notify_sign("whsec_test-secret-0123", 1700000000, "{\"a\":1}", 7, sig), 0);
	assert_string_equal(sig, "4f88d3dfd7cd0494bed1bbbb20e620cf15fb24b449d77bb201cdaff8e9adc673");
	/* the timestamp is signed: another one, another signature */
	assert_int_equal(notify_sign("whsec_test-secret-0123", 1700000001, "{\"a\":1}", 7, sig), 0);
	assert_string_not_equal(sig, "4f88d3dfd7cd0494bed1bbbb20e620cf15fb24b449d77bb201cdaff8e9adc673");
}

static int url(const char *u, bool *literal)
{
	char host[256], why[200];
	return notify_url_check(u, host, sizeof(host), literal, why, sizeof(why));
}

static void test_url_shapes(void **state)
{
	bool literal;
	char host[256], why[200];

	(void)state;
	assert_int_equal(url("https://hooks.example.org/labd?x=1", &literal), 0);
	assert_false(literal);
	assert_int_equal(url("http://198.18.3.2:8080/hook", &literal), 0);
	assert_true(literal);
	assert_int_equal(notify_url_check("http://[2001:db8::1]:81/", host, sizeof(host), &literal,
					  why, sizeof(why)),
			 0);
	assert_true(literal);
	assert_string_equal(host, "2001:db8::1");
	assert_int_equal(url("ftp://example.org/x", &literal), -EINVAL);
	assert_int_equal(url("file:///etc/passwd", &literal), -EINVAL);
	assert_int_equal(url("gopher://example.org/", &literal), -EINVAL);
	assert_int_equal(url("http://user:pw@example.org/", &literal), -EINVAL);
	assert_int_equal(url("http://example.org/#frag", &literal), -EINVAL);
	assert_int_equal(url("http://exa mple.org/", &literal), -EINVAL);
	assert_int_equal(url("http://example.org/\n", &literal), -EINVAL);
	assert_int_equal(url("http://", &literal), -EINVAL);
	assert_int_equal(url("example.org/hook", &literal), -EINVAL);
	char longer[WEBHOOK_URL_MAX + 2];
	memset(longer, 'a', sizeof(longer) - 1);
	memcpy(longer, "http://a.b/", 11);
	longer[sizeof(longer) - 1] = '\0';
	assert_int_equal(url(longer, &literal), -EINVAL);
}

static void test_addresses_listed(void **state)
{
	const char *deny = "10.0.0.0/8, 198.19.0.0/16,fc00::/7";
	char why[200];

	(void)state;
	assert_true(notify_address_listed("10.1.2.3", deny));
	assert_true(notify_address_listed("198.19.200.1", deny));
	assert_true(notify_address_listed("fd00::5", deny));
	assert_false(notify_address_listed("198.18.1.2", deny));
	assert_false(notify_address_listed("8.8.8.8", deny));
	/* a v4 address in v6 forms is the v4 address */
	assert_true(notify_address_listed("::ffff:10.0.0.1", deny));
	assert_true(notify_address_listed("64:ff9b::a00:1", deny)); /* NAT64 of 10.0.0.1 */
	assert_false(notify_address_listed("64:ff9b::808:808", deny));
	/* the ranges no egress reaches, whatever deny says */
	assert_false(notify_text_allowed("127.0.0.1", "", why, sizeof(why)));
	assert_false(notify_text_allowed("127.8.9.10", "", why, sizeof(why)));
	assert_false(notify_text_allowed("::1", "", why, sizeof(why)));
	assert_false(notify_text_allowed("0.0.0.0", "", why, sizeof(why)));
	assert_false(notify_text_allowed("169.254.169.254", "", why, sizeof(why)));
	assert_false(notify_text_allowed("fe80::1", "", why, sizeof(why)));
	assert_false(notify_text_allowed("::ffff:127.0.0.1", "", why, sizeof(why)));
	assert_false(notify_text_allowed("64:ff9b::7f00:1", "", why, sizeof(why)));
	assert_false(notify_text_allowed("2002:7f00:1::", "", why, sizeof(why))); /* 6to4 */
	assert_false(notify_text_allowed("10.0.0.1", deny, why, sizeof(why)));
	assert_non_null(strstr(why, "[network] deny"));
	assert_true(notify_text_allowed("198.18.77.2", deny, why, sizeof(why)));
}

static void hook(struct fixture *f, int64_t user, unsigned events, struct webhook *w)
{
	memset(w, 0, sizeof(*w));
	w->user_id = user;
	w->events = events;
	w->created_at = 1;
	snprintf(w->url, sizeof(w->url), "http://198.18.1.2/");
	snprintf(w->secret, sizeof(w->secret), "whsec_0123456789abcdef");
	assert_int_equal(webhooks_create(f->db, w, 2), 1);
}

static void test_limit_and_owner(void **state)
{
	struct fixture *f = *state;
	struct webhook a, b, c;

	hook(f, f->ann, 1, &a);
	hook(f, f->ann, 1, &b);
	c = a;
	assert_int_equal(webhooks_create(f->db, &c, 2), 0); /* the third of two */
	assert_int_equal(webhooks_find(f->db, f->bob, a.id, &c), 0);
	assert_int_equal(webhooks_delete(f->db, f->bob, a.id), 0);
	assert_int_equal(webhooks_find(f->db, f->ann, a.id, &c), 1);
	assert_string_equal(c.secret, "whsec_0123456789abcdef");
}

static void test_enqueue_once_per_key_and_bounded(void **state)
{
	struct fixture *f = *state;
	struct webhook a, b;
	struct delivery d[4];
	int64_t next = 0;
	char key[32];

	hook(f, f->ann, 1u << 0, &a);
	hook(f, f->ann, 1u << 3, &b);
	/* only the webhook taking the event, once per key */
	assert_int_equal(webhooks_enqueue(f->db, f->ann, 1u << 0, "job.ended", "k1", "{}", 100), 1);
	assert_int_equal(webhooks_enqueue(f->db, f->ann, 1u << 0, "job.ended", "k1", "{}", 100), 0);
	assert_int_equal(webhooks_enqueue(f->db, f->bob, 1u << 0, "job.ended", "k2", "{}", 100), 0);
	assert_int_equal(webhooks_due(f->db, 100, d, 4, &next), 1);
	assert_int_equal(d[0].webhook_id, a.id);
	assert_string_equal(d[0].body, "{}");
	/* a retry later: not due before its time, which the next due time says */
	struct delivery_attempt at = {.delivery_id = d[0].id, .attempt = 1, .at_ms = 100, .status = 500};
	snprintf(at.error, sizeof(at.error), "answered 500");
	assert_int_equal(webhooks_record(f->db, &d[0], &at, DELIVERY_PENDING, 5000), 0);
	webhooks_delivery_release(&d[0]);
	assert_int_equal(webhooks_due(f->db, 200, d, 4, &next), 0);
	assert_int_equal(next, 5000);
	/* the pending bound: past it events are dropped, not queued */
	for (int i = 0; i < WEBHOOK_PENDING_MAX + 5; i++) {
		snprintf(key, sizeof(key), "n%d", i);
		webhooks_enqueue(f->db, f->ann, 1u << 0, "job.ended", key, "{}", 100);
	}
	int pending = 0;
	assert_int_equal(db_one(f->db,
				"SELECT count(*) FROM webhook_deliveries WHERE webhook_id = ? AND "
				"state = 'pending'",
				"i", db_row_int, &pending, a.id),
			 1);
	assert_int_equal(pending, WEBHOOK_PENDING_MAX);
	/* deleting the webhook takes its deliveries along */
	assert_int_equal(webhooks_delete(f->db, f->ann, a.id), 1);
	assert_int_equal(webhooks_due(f->db, 1LL << 50, d, 4, &next), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sign_matches_python_hmac),
		cmocka_unit_test(test_url_shapes),
		cmocka_unit_test(test_addresses_listed),
		cmocka_unit_test_setup_teardown(test_limit_and_owner, setup, teardown),
		cmocka_unit_test_setup_teardown(test_enqueue_once_per_key_and_bounded, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
