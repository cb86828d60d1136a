/* password.h - scrypt password hashing (OpenSSL EVP_KDF "SCRYPT").
 * Stored form: "$scrypt$n=N,r=R,p=P$<salt b64url>$<key b64url>", so every hash
 * keeps the parameters it was made with. */
#ifndef LABD_PASSWORD_H
#define LABD_PASSWORD_H

#include "store/users.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PASSWORD_HASH_MAX USERS_HASH_MAX /* hashes live in users rows */
#define PASSWORD_MAX_LENGTH 1024

struct password_params {
	uint64_t n; /* power of two, >= 2 */
	unsigned r, p;
};

/* Hashes password with a fresh 16-byte salt into out[PASSWORD_HASH_MAX]; -1 on error. */
int password_hash(const char *password, const struct password_params *params,
		  char out[PASSWORD_HASH_MAX]);
/* True when password matches stored (constant-time compare); false on any
 * malformed stored hash. */
bool password_verify(const char *password, const char *stored);
/* Verifies against a fixed dummy hash so that a login for an unknown user takes
 * as long as one for a known user. Always false. */
bool password_verify_dummy(const char *password, const struct password_params *params);
/* Hashing with bounded concurrency, so a flood of logins cannot take every
 * CPU: at most `slots` hashes run at once, and a caller waits at most wait_ms
 * for one to free, behind at most waiting_max others (beyond that it would
 * wait in vain: -EBUSY at once). Before this is called (the CLI) hashing is
 * unbounded. Call once, before the workers start. */
void password_slots_init(unsigned slots, unsigned waiting_max, int64_t wait_ms);
/* Takes a hashing slot: 0, or -EBUSY when none freed in time (answer 503).
 * Pair with password_slot_release. */
int password_slot_acquire(void);
void password_slot_release(void);

/* A random password of 20 base64url characters (120 bits) into out[24]; -1 on error. */
int password_generate(char out[24]);
/* Checks length rules; returns NULL when acceptable or a static message why not. */
const char *password_policy_error(const char *password, unsigned min_length);

#endif
