/* password.c - scrypt hashes through OpenSSL 3's EVP_KDF; see password.h. */
#include "auth/password.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "http/workers.h"
#include "labd/crypto.h"

#define SALT_LEN 16
#define KEY_LEN 32

static int scrypt_derive(const char *password, const unsigned char *salt, size_t saltlen,
			 const struct password_params *pp, unsigned char *key, size_t keylen)
{
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "SCRYPT", NULL);
	EVP_KDF_CTX *ctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
	uint64_t n = pp->n;
	uint32_t r = pp->r, p = pp->p;
	/* OpenSSL's default maxmem (32 MiB) is below 128*N*r for N=2^15,r=8 plus
	 * overhead; allow what the parameters need and a margin. */
	uint64_t maxmem = 128ULL * n * r * 2 + (1ULL << 20);
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_PASSWORD, (void *)password,
						  strlen(password)),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, saltlen),
		OSSL_PARAM_construct_uint64(OSSL_KDF_PARAM_SCRYPT_N, &n),
		OSSL_PARAM_construct_uint32(OSSL_KDF_PARAM_SCRYPT_R, &r),
		OSSL_PARAM_construct_uint32(OSSL_KDF_PARAM_SCRYPT_P, &p),
		OSSL_PARAM_construct_uint64(OSSL_KDF_PARAM_SCRYPT_MAXMEM, &maxmem),
		OSSL_PARAM_construct_end(),
	};
	int rc;

	workers_blocking(true); /* tens to hundreds of ms: other workers take new connections */
	rc = (ctx && EVP_KDF_derive(ctx, key, keylen, params) == 1) ? 0 : -1;
	workers_blocking(false);

	EVP_KDF_CTX_free(ctx);
	EVP_KDF_free(kdf);
	return rc;
}

int password_hash(const char *password, const struct password_params *pp,
		  char out[PASSWORD_HASH_MAX])
{
	unsigned char salt[SALT_LEN], key[KEY_LEN];
	char salt64[32], key64[48];
	int rc = -1;

	if (crypto_random(salt, sizeof(salt)) < 0 ||
	    scrypt_derive(password, salt, sizeof(salt), pp, key, sizeof(key)) < 0)
		goto out;
	crypto_b64url(salt, sizeof(salt), salt64, sizeof(salt64));
	crypto_b64url(key, sizeof(key), key64, sizeof(key64));
	snprintf(out, PASSWORD_HASH_MAX, "$scrypt$n=%" PRIu64 ",r=%u,p=%u$%s$%s", pp->n, pp->r,
		 pp->p, salt64, key64);
	rc = 0;
out:
	OPENSSL_cleanse(key, sizeof(key));
	return rc;
}

/* Splits a stored hash into parameters, salt and key; -1 if malformed. */
static int parse_stored(const char *stored, struct password_params *pp, unsigned char *salt,
			int *saltlen, unsigned char *key, int *keylen)
{
	char salt64[64], key64[64];
	uint64_t n;
	unsigned r, p;
	int consumed = 0;

	if (sscanf(stored, "$scrypt$n=%" SCNu64 ",r=%u,p=%u$%63[A-Za-z0-9_-]$%63[A-Za-z0-9_-]%n", &n,
		   &r, &p, salt64, key64, &consumed) != 5 ||
	    stored[consumed] != '\0')
		return -1;
	if (n < 2 || (n & (n - 1)) || n > (1ULL << 24) || r < 1 || r > 64 || p < 1 || p > 64)
		return -1;
	*saltlen = crypto_b64url_decode(salt64, salt, SALT_LEN * 2);
	*keylen = crypto_b64url_decode(key64, key, KEY_LEN);
	if (*saltlen < 8 || *keylen != KEY_LEN)
		return -1;
	pp->n = n;
	pp->r = r;
	pp->p = p;
	return 0;
}

bool password_verify(const char *password, const char *stored)
{
	struct password_params pp;
	unsigned char salt[SALT_LEN * 2], want[KEY_LEN], got[KEY_LEN];
	int saltlen, keylen;
	bool ok = false;

	if (strlen(password) > PASSWORD_MAX_LENGTH ||
	    parse_stored(stored, &pp, salt, &saltlen, want, &keylen) < 0)
		return false;
	if (scrypt_derive(password, salt, (size_t)saltlen, &pp, got, sizeof(got)) == 0)
		ok = crypto_equal(got, want, sizeof(got));
	OPENSSL_cleanse(got, sizeof(got));
	return ok;
}

bool password_verify_dummy(const char *password, const struct password_params *pp)
{
	static const unsigned char salt[SALT_LEN] = "labd-dummy-salt";
	unsigned char key[KEY_LEN];

	if (strlen(password) <= PASSWORD_MAX_LENGTH)
		scrypt_derive(password, salt, sizeof(salt), pp, key, sizeof(key));
	return false;
}

int password_generate(char out[24])
{
	return crypto_random_token(out, 24, 15);
}

const char *password_policy_error(const char *password, unsigned min_length)
{
	size_t len = strlen(password);

	if (len < min_length)
		return "is too short";
	if (len > PASSWORD_MAX_LENGTH)
		return "is too long (at most 1024 characters)";
	return NULL;
}

/* The hashing slots: one process-wide gate (the web process hashes only for
 * requests), a mutex and a condition variable rather than a semaphore so that
 * waiters can be counted and bounded. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t freed;
	bool bounded;
	unsigned slots, waiting_max;
	unsigned hashing, waiting;
	int64_t wait_ms;
} gate = {.lock = PTHREAD_MUTEX_INITIALIZER};

void password_slots_init(unsigned slots, unsigned waiting_max, int64_t wait_ms)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&gate.freed, &attr);
	pthread_condattr_destroy(&attr);
	gate.slots = slots == 0 ? 1 : slots;
	gate.waiting_max = waiting_max;
	gate.wait_ms = wait_ms;
	gate.bounded = true;
}

int password_slot_acquire(void)
{
	struct timespec deadline;
	int rc = 0;

	if (!gate.bounded)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += gate.wait_ms / 1000;
	deadline.tv_nsec += (long)(gate.wait_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&gate.lock);
	if (gate.hashing >= gate.slots && gate.waiting >= gate.waiting_max) {
		rc = -EBUSY; /* the queue is full: a turn would come too late */
		goto out;
	}
	gate.waiting++;
	bool waits = gate.hashing >= gate.slots;
	if (waits)
		workers_blocking(true); /* on a worker (no thread was free): as for a hash */
	while (gate.hashing >= gate.slots && rc == 0)
		if (pthread_cond_timedwait(&gate.freed, &gate.lock, &deadline) == ETIMEDOUT)
			rc = gate.hashing >= gate.slots ? -EBUSY : 0;
	if (waits)
		workers_blocking(false);
	gate.waiting--;
	if (rc == 0)
		gate.hashing++;
out:
	pthread_mutex_unlock(&gate.lock);
	return rc;
}

void password_slot_release(void)
{
	if (!gate.bounded)
		return;
	pthread_mutex_lock(&gate.lock);
	gate.hashing--;
	pthread_cond_signal(&gate.freed);
	pthread_mutex_unlock(&gate.lock);
}
