/* Unit tests: the shared value parsers (common/parse.c), table-driven. */
#include "unit.h"

#include <errno.h>

#include "labd/crypto.h"
#include "labd/parse.h"

struct num_case {
	const char *text;
	int rc;
	uint64_t want;
};

static void test_user_names(void **state)
{
	static const struct {
		const char *name;
		bool ok;
	} cases[] = {
		{"a", true},
		{"alice", true},
		{"alice_2-b", true},
		{"abcdefghijklmnopqrstuvwxyz012345", true},   /* 32 */
		{"abcdefghijklmnopqrstuvwxyz0123456", false}, /* 33 */
		{"", false},
		{"_svc", false}, /* a letter or digit first: no leading '_', '-' or '.' */
		{"-a", false},
		{".a", false},
		{"..", false},
		{"1abc", true}, /* student numbers */
		{"20231234", true},
		{"john.doe", true},
		{"a_", true},
		{"Alice", false},
		{"a.b", true},
		{"a/b", false},
		{"../x", false},
		{"a b", false},
		{"caf\xc3\xa9", false},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (parse_user_name_ok(cases[i].name) != cases[i].ok)
			fail_msg("user name \"%s\": expected %s", cases[i].name,
				 cases[i].ok ? "valid" : "invalid");
	}
	assert_false(parse_user_name_ok(NULL));
}

static void test_tokens(void **state)
{
	static const struct {
		const char *token;
		bool ok;
	} cases[] = {
		{"AZaz09-_AZaz09-_AZaz09-_AZaz09-_AZaz09-_AZa", true}, /* 43, every class */
		{"AZaz09-_AZaz09-_AZaz09-_AZaz09-_AZaz09-_AZ", false}, /* 42 */
		{"AZaz09-_AZaz09-_AZaz09-_AZaz09-_AZaz09-_AZab", false}, /* 44 */
		{"AZaz09-_AZaz09-_AZaz09-_AZaz09-_AZaz09-_AZ=", false}, /* padding */
		{"AZaz09+/AZaz09-_AZaz09-_AZaz09-_AZaz09-_AZa", false}, /* plain base64 */
		{"AZaz09-_AZaz09-_AZaz09 _AZaz09-_AZaz09-_AZa", false},
		{"", false},
	};
	char generated[PARSE_TOKEN_LEN + 1];
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (parse_token_ok(cases[i].token) != cases[i].ok)
			fail_msg("token \"%s\": expected %s", cases[i].token,
				 cases[i].ok ? "valid" : "invalid");
	}
	assert_false(parse_token_ok(NULL));
	/* What the server generates for runtimes and sessions is accepted. */
	for (int i = 0; i < 64; i++) {
		assert_int_equal(crypto_random_token(generated, sizeof(generated), 32), 0);
		assert_true(parse_token_ok(generated));
	}
}

static void check_sizes(const struct num_case *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t v = 12345;
		int rc = parse_size_bytes(c[i].text, &v);
		if (rc != c[i].rc || (rc == 0 && v != c[i].want) || (rc != 0 && v != 12345))
			fail_msg("size \"%s\": rc %d value %llu", c[i].text, rc, (unsigned long long)v);
	}
}

static void test_sizes(void **state)
{
	static const struct num_case cases[] = {
		{"0", 0, 0},
		{"4096", 0, 4096},
		{"64K", 0, 64ULL << 10},
		{"512k", 0, 512ULL << 10},
		{"1M", 0, 1ULL << 20},
		{"4MiB", 0, 4ULL << 20},
		{"4MB", 0, 4ULL << 20},
		{"15G", 0, 15ULL << 30},
		{"15g", 0, 15ULL << 30},
		{"1T", 0, 1ULL << 40},
		{"16777215T", 0, 16777215ULL << 40},
		{"16777216T", -ERANGE, 0}, /* 2^64 bytes */
		{"99999999999T", -ERANGE, 0},
		{"18446744073709551615", 0, UINT64_MAX},
		{"18446744073709551616", -ERANGE, 0},
		{"184467440737095516160", -ERANGE, 0},
		{"", -EINVAL, 0},
		{"K", -EINVAL, 0},
		{"-1G", -EINVAL, 0},
		{"+1G", -EINVAL, 0},
		{" 1G", -EINVAL, 0},
		{"1G ", -EINVAL, 0},
		{"1Gx", -EINVAL, 0},
		{"1X", -EINVAL, 0},
		{"1P", -EINVAL, 0},
		{"1B", -EINVAL, 0}, /* "B" only after a unit */
		{"1KiBB", -EINVAL, 0},
		{"1.5G", -EINVAL, 0},
		{"0x10", -EINVAL, 0},
	};
	(void)state;
	check_sizes(cases, sizeof(cases) / sizeof(cases[0]));
	assert_int_equal(parse_size_bytes(NULL, &(uint64_t){0}), -EINVAL);
}

static void test_durations(void **state)
{
	static const struct num_case cases[] = {
		{"0", 0, 0},
		{"90", 0, 90},
		{"90s", 0, 90},
		{"30m", 0, 1800},
		{"12h", 0, 12 * 3600},
		{"7d", 0, 7 * 86400},
		{"2147483647d", 0, 2147483647ULL * 86400},
		{"2147483648d", -ERANGE, 0},
		{"99999999999999999999", -ERANGE, 0},
		{"999999999999999999d", -ERANGE, 0},
		{"", -EINVAL, 0},
		{"m", -EINVAL, 0},
		{"5mm", -EINVAL, 0},
		{"1w", -EINVAL, 0},
		{"1H", -EINVAL, 0},
		{"-5", -EINVAL, 0},
		{"1.5h", -EINVAL, 0},
		{" 5m", -EINVAL, 0},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t v = -7;
		int rc = parse_duration_s(cases[i].text, &v);
		if (rc != cases[i].rc || (rc == 0 && (uint64_t)v != cases[i].want) || (rc && v != -7))
			fail_msg("duration \"%s\": rc %d value %lld", cases[i].text, rc, (long long)v);
	}
}

static void test_cpus(void **state)
{
	static const struct num_case cases[] = {
		{"2", 0, 2000},
		{"0.5", 0, 500},
		{"1.25", 0, 1250},
		{"0.001", 0, 1},
		{"1024", 0, 1024000},
		{"1024.0", 0, 1024000},
		{"1024.001", -ERANGE, 0},
		{"1025", -ERANGE, 0},
		{"1000000", -ERANGE, 0}, /* config's old strtod allowed up to 1e6 */
		{"99999999999999999999", -ERANGE, 0},
		{"0", -ERANGE, 0},
		{"0.000", -ERANGE, 0},
		{"0.0001", -EINVAL, 0},
		{"1.", -EINVAL, 0},
		{".5", -EINVAL, 0},
		{"1e3", -EINVAL, 0},
		{"+2", -EINVAL, 0},
		{"-1", -EINVAL, 0},
		{" 2", -EINVAL, 0},
		{"2 ", -EINVAL, 0},
		{"", -EINVAL, 0},
		{"inf", -EINVAL, 0},
		{"nan", -EINVAL, 0},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t v = 7;
		int rc = parse_cpus_milli(cases[i].text, &v);
		if (rc != cases[i].rc || (rc == 0 && v != cases[i].want) || (rc && v != 7))
			fail_msg("cpus \"%s\": rc %d value %u", cases[i].text, rc, v);
	}
}

static void test_uint(void **state)
{
	uint64_t v = 0;
	(void)state;
	assert_int_equal(parse_uint("512", 1, 1000, &v), 0);
	assert_int_equal(v, 512);
	assert_int_equal(parse_uint("0", 0, 10, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(parse_uint("0", 1, 1000, &v), -ERANGE);
	assert_int_equal(parse_uint("1001", 1, 1000, &v), -ERANGE);
	assert_int_equal(parse_uint("18446744073709551615", 0, UINT64_MAX, &v), 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(parse_uint("18446744073709551616", 0, UINT64_MAX, &v), -ERANGE);
	assert_int_equal(parse_uint("+5", 0, 10, &v), -EINVAL);
	assert_int_equal(parse_uint("-5", 0, 10, &v), -EINVAL);
	assert_int_equal(parse_uint("5K", 0, 10, &v), -EINVAL);
	assert_int_equal(parse_uint("", 0, 10, &v), -EINVAL);
	assert_int_equal(parse_uint(NULL, 0, 10, &v), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_user_names), cmocka_unit_test(test_tokens),
		cmocka_unit_test(test_sizes),	   cmocka_unit_test(test_durations),
		cmocka_unit_test(test_cpus),	   cmocka_unit_test(test_uint),
	};
	return cmocka_run_group_tests_name("parse", tests, NULL, NULL);
}
