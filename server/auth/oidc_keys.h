/* oidc_keys.h - an OpenID Provider's signing keys (a JWK Set, RFC 7517) as OpenSSL
 * public keys: RSA (RS256) and EC P-256 (ES256); every other key is skipped. Pure:
 * no I/O; oidc_provider.c fetches the set, oidc_jwt.c verifies with it. */
#ifndef LABD_OIDC_KEYS_H
#define LABD_OIDC_KEYS_H

#include <jansson.h>
#include <openssl/evp.h>

#define OIDC_KEYS_MAX 32     /* keys kept of one set; the rest are ignored */
#define OIDC_KID_MAX 128     /* longest key id taken */
#define OIDC_RSA_MIN_BITS 2048

enum oidc_key_type { OIDC_KEY_RSA, OIDC_KEY_EC_P256 };

struct oidc_key {
	char kid[OIDC_KID_MAX + 1]; /* "" when the set names none */
	char alg[16];               /* the JWK's "alg", "" when absent */
	enum oidc_key_type type;
	EVP_PKEY *pkey;             /* owned */
};

/* Shared by reference: a sign-in verifying with a set keeps it alive while a
 * rotation replaces it (oidc_keys_ref / oidc_keys_unref). */
struct oidc_keys {
	struct oidc_key key[OIDC_KEYS_MAX];
	size_t n;
	int refs;
};

/* Reads a JWK Set ({"keys":[...]}) into a new set with one reference; NULL when
 * jwks is not a set. Keys that are not for signatures, of another type or
 * curve, malformed, or RSA under OIDC_RSA_MIN_BITS are skipped. */
struct oidc_keys *oidc_keys_parse(const json_t *jwks);
/* The key for a signature of alg ("RS256", "ES256") under kid (NULL: the token
 * names none, which picks the set's only key of that type); borrowed from keys.
 * NULL when there is none. */
const struct oidc_key *oidc_keys_find(const struct oidc_keys *keys, const char *kid,
				      const char *alg);
struct oidc_keys *oidc_keys_ref(struct oidc_keys *keys);
/* Drops one reference; frees the set with the last. NULL is ignored. */
void oidc_keys_unref(struct oidc_keys *keys);

#endif
