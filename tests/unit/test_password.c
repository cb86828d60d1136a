/* Unit tests: scrypt hashing, verification, stored parameters, policy. */
#include "unit.h"

#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include "labd/clock.h"
#include "labd/crypto.h"
#include "auth/password.h"

static const struct password_params fast = {1024, 8, 1};

static void test_hash_and_verify(void **state)
{
	char hash[PASSWORD_HASH_MAX];
	(void)state;
	assert_int_equal(password_hash("correct horse battery", &fast, hash), 0);
	assert_true(strncmp(hash, "$scrypt$n=1024,r=8,p=1$", 23) == 0);
	assert_true(password_verify("correct horse battery", hash));
	assert_false(password_verify("correct horse batterz", hash));
	assert_false(password_verify("", hash));
}

static void test_salt_is_random(void **state)
{
	char a[PASSWORD_HASH_MAX], b[PASSWORD_HASH_MAX];
	(void)state;
	assert_int_equal(password_hash("same password", &fast, a), 0);
	assert_int_equal(password_hash("same password", &fast, b), 0);
	assert_string_not_equal(a, b);
	assert_true(password_verify("same password", a));
	assert_true(password_verify("same password", b));
}

static void test_stored_parameters_are_used(void **state)
{
	struct password_params other = {2048, 4, 2};
	char hash[PASSWORD_HASH_MAX];
	(void)state;
	assert_int_equal(password_hash("parameters travel", &other, hash), 0);
	assert_true(strncmp(hash, "$scrypt$n=2048,r=4,p=2$", 23) == 0);
	assert_true(password_verify("parameters travel", hash));
}

static void test_default_cost(void **state)
{
	struct password_params def = {32768, 8, 1};
	char hash[PASSWORD_HASH_MAX];
	(void)state;
	/* The shipped default must work within OpenSSL's memory limit handling. */
	assert_int_equal(password_hash("default cost", &def, hash), 0);
	assert_true(password_verify("default cost", hash));
}

static void test_malformed_hashes_never_verify(void **state)
{
	static const char *const bad[] = {
		"",
		"plain",
		"$scrypt$n=1024,r=8,p=1$c2FsdA$",
		"$scrypt$n=1000,r=8,p=1$c2FsdHNhbHRzYWx0$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"$scrypt$n=1024,r=8,p=1$c2FsdHNhbHRzYWx0$AAAA",
		"$scrypt$n=1024,r=8,p=1$c2FsdHNhbHRzYWx0$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA$x",
		"$scrypt$n=1099511627776,r=8,p=1$c2FsdHNhbHRzYWx0$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
	};
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(password_verify("anything", bad[i]));
	assert_false(password_verify_dummy("anything", &fast));
}

static void test_policy(void **state)
{
	char longpw[PASSWORD_MAX_LENGTH + 2];
	(void)state;
	assert_non_null(password_policy_error("short", 10));
	assert_null(password_policy_error("exactly10!", 10));
	memset(longpw, 'a', sizeof(longpw) - 1);
	longpw[sizeof(longpw) - 1] = '\0';
	assert_non_null(password_policy_error(longpw, 10));
}

static void test_generate(void **state)
{
	char a[24], b[24];
	(void)state;
	assert_int_equal(password_generate(a), 0);
	assert_int_equal(password_generate(b), 0);
	assert_int_equal(strlen(a), 20);
	assert_string_not_equal(a, b);
}

static void test_crypto_helpers(void **state)
{
	unsigned char raw[] = {0xfb, 0xff, 0x00, 0x10}, back[8];
	char text[16], hex[65];
	(void)state;
	assert_int_equal(crypto_b64url(raw, sizeof(raw), text, sizeof(text)), 0);
	assert_string_equal(text, "-_8AEA");
	assert_int_equal(crypto_b64url_decode(text, back, sizeof(back)), 4);
	assert_memory_equal(raw, back, 4);
	assert_int_equal(crypto_b64url_decode("ab+c", back, sizeof(back)), -1);
	assert_int_equal(crypto_b64url(raw, sizeof(raw), text, 6), -1);
	crypto_sha256_hex("abc", hex);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	assert_true(crypto_equal("abc", "abc", 3));
	assert_false(crypto_equal("abc", "abd", 3));
}

static void *take_and_release(void *arg)
{
	int *rc = arg;

	*rc = password_slot_acquire();
	if (*rc == 0)
		password_slot_release();
	return NULL;
}

/* Hashing slots: bounded hashes, a bounded queue and a bounded wait (runs
 * last: the gate is process-wide and stays bounded afterwards). */
static void test_hash_slots(void **state)
{
	pthread_t t;
	int waiter = 1;
	(void)state;
	/* one slot and no queue: a second caller is refused at once */
	password_slots_init(1, 0, 1000);
	assert_int_equal(password_slot_acquire(), 0);
	long long t0 = clock_ms();
	assert_int_equal(password_slot_acquire(), -EBUSY);
	assert_true(clock_ms() - t0 < 500);
	password_slot_release();
	assert_int_equal(password_slot_acquire(), 0);
	password_slot_release();
	/* one slot, room to wait: a second caller waits, then gives up */
	password_slots_init(1, 4, 100);
	assert_int_equal(password_slot_acquire(), 0);
	t0 = clock_ms();
	assert_int_equal(password_slot_acquire(), -EBUSY);
	assert_true(clock_ms() - t0 >= 90);
	password_slot_release();
	/* one place in the queue: while a waiter holds it a third caller is
	 * refused at once; the waiter gets the slot when it frees */
	password_slots_init(1, 1, 5000);
	assert_int_equal(password_slot_acquire(), 0);
	assert_int_equal(pthread_create(&t, NULL, take_and_release, &waiter), 0);
	usleep(100 * 1000);
	t0 = clock_ms();
	assert_int_equal(password_slot_acquire(), -EBUSY);
	assert_true(clock_ms() - t0 < 500);
	password_slot_release();
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(waiter, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hash_and_verify),
		cmocka_unit_test(test_salt_is_random),
		cmocka_unit_test(test_stored_parameters_are_used),
		cmocka_unit_test(test_default_cost),
		cmocka_unit_test(test_malformed_hashes_never_verify),
		cmocka_unit_test(test_policy),
		cmocka_unit_test(test_generate),
		cmocka_unit_test(test_crypto_helpers),
		cmocka_unit_test(test_hash_slots),
	};
	return cmocka_run_group_tests_name("password", tests, NULL, NULL);
}
