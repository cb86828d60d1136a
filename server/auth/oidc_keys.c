/* oidc_keys.c - a JWK Set as OpenSSL public keys; see oidc_keys.h. */
#include "auth/oidc_keys.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <stdlib.h>
#include <string.h>

#include "labd/crypto.h"
#include "labd/str.h"

#define JWK_BYTES_MAX 1024 /* an 8192-bit modulus */

/* A base64url member of a JWK, decoded; its length or -1. */
static int member_bytes(const json_t *jwk, const char *name, unsigned char *out, size_t outlen)
{
	const char *text = json_string_value(json_object_get(jwk, name));

	return text && *text ? crypto_b64url_decode(text, out, outlen) : -1;
}

/* Builds a public key of the named type from params; NULL when OpenSSL refuses. */
static EVP_PKEY *key_from(const char *type, OSSL_PARAM_BLD *bld)
{
	OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
	EVP_PKEY *pkey = NULL;

	if (!params || !ctx || EVP_PKEY_fromdata_init(ctx) <= 0 ||
	    EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) <= 0)
		pkey = NULL;
	EVP_PKEY_CTX_free(ctx);
	OSSL_PARAM_free(params);
	return pkey;
}

static EVP_PKEY *rsa_key(const json_t *jwk)
{
	unsigned char n[JWK_BYTES_MAX], e[16];
	int nlen = member_bytes(jwk, "n", n, sizeof(n)), elen = member_bytes(jwk, "e", e, sizeof(e));
	OSSL_PARAM_BLD *bld;
	BIGNUM *bn_n = NULL, *bn_e = NULL;
	EVP_PKEY *pkey = NULL;

	if (nlen <= 0 || elen <= 0 || !(bld = OSSL_PARAM_BLD_new()))
		return NULL;
	bn_n = BN_bin2bn(n, nlen, NULL);
	bn_e = BN_bin2bn(e, elen, NULL);
	if (bn_n && bn_e && BN_num_bits(bn_n) >= OIDC_RSA_MIN_BITS &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn_n) &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, bn_e))
		pkey = key_from("RSA", bld);
	BN_free(bn_n);
	BN_free(bn_e);
	OSSL_PARAM_BLD_free(bld);
	return pkey;
}

/* The point goes in uncompressed (0x04 || x || y); OpenSSL refuses one that is
 * not on the curve. */
static EVP_PKEY *ec_key(const json_t *jwk)
{
	unsigned char x[48], y[48], point[65] = {0x04};
	const char *crv = json_string_value(json_object_get(jwk, "crv"));
	OSSL_PARAM_BLD *bld;
	EVP_PKEY *pkey = NULL;

	if (!crv || strcmp(crv, "P-256") != 0 || member_bytes(jwk, "x", x, sizeof(x)) != 32 ||
	    member_bytes(jwk, "y", y, sizeof(y)) != 32 || !(bld = OSSL_PARAM_BLD_new()))
		return NULL;
	memcpy(point + 1, x, 32);
	memcpy(point + 33, y, 32);
	if (OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) &&
	    OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof(point)))
		pkey = key_from("EC", bld);
	OSSL_PARAM_BLD_free(bld);
	return pkey;
}

/* One JWK into *out; false when it is skipped. */
static bool key_read(const json_t *jwk, struct oidc_key *out)
{
	const char *kty = json_string_value(json_object_get(jwk, "kty"));
	const char *use = json_string_value(json_object_get(jwk, "use"));
	const char *kid = json_string_value(json_object_get(jwk, "kid"));
	const char *alg = json_string_value(json_object_get(jwk, "alg"));

	if (!json_is_object(jwk) || !kty || (use && strcmp(use, "sig") != 0))
		return false;
	if ((kid && str_copy(out->kid, sizeof(out->kid), kid) < 0) ||
	    (alg && str_copy(out->alg, sizeof(out->alg), alg) < 0))
		return false;
	if (!strcmp(kty, "RSA")) {
		out->type = OIDC_KEY_RSA;
		out->pkey = rsa_key(jwk);
	} else if (!strcmp(kty, "EC")) {
		out->type = OIDC_KEY_EC_P256;
		out->pkey = ec_key(jwk);
	}
	return out->pkey != NULL;
}

struct oidc_keys *oidc_keys_parse(const json_t *jwks)
{
	const json_t *list = json_object_get(jwks, "keys");
	struct oidc_keys *keys;
	size_t i;
	json_t *jwk;

	if (!json_is_array(list) || !(keys = calloc(1, sizeof(*keys))))
		return NULL;
	keys->refs = 1;
	json_array_foreach(list, i, jwk)
	{
		if (keys->n == OIDC_KEYS_MAX)
			break;
		memset(&keys->key[keys->n], 0, sizeof(keys->key[0]));
		if (key_read(jwk, &keys->key[keys->n]))
			keys->n++;
	}
	return keys;
}

static bool alg_type(const char *alg, enum oidc_key_type *type)
{
	if (!strcmp(alg, "RS256"))
		*type = OIDC_KEY_RSA;
	else if (!strcmp(alg, "ES256"))
		*type = OIDC_KEY_EC_P256;
	else
		return false;
	return true;
}

const struct oidc_key *oidc_keys_find(const struct oidc_keys *keys, const char *kid,
				      const char *alg)
{
	const struct oidc_key *found = NULL;
	enum oidc_key_type type;

	if (!keys || !alg_type(alg, &type))
		return NULL;
	for (size_t i = 0; i < keys->n; i++) {
		const struct oidc_key *k = &keys->key[i];

		if (k->type != type || (k->alg[0] && strcmp(k->alg, alg) != 0))
			continue;
		if (kid && !strcmp(k->kid, kid))
			return k;
		/* Without a kid only an unambiguous key will do. */
		if (!kid) {
			if (found)
				return NULL;
			found = k;
		}
	}
	return found;
}

struct oidc_keys *oidc_keys_ref(struct oidc_keys *keys)
{
	if (keys)
		__atomic_add_fetch(&keys->refs, 1, __ATOMIC_SEQ_CST);
	return keys;
}

void oidc_keys_unref(struct oidc_keys *keys)
{
	if (!keys || __atomic_sub_fetch(&keys->refs, 1, __ATOMIC_SEQ_CST) > 0)
		return;
	for (size_t i = 0; i < keys->n; i++)
		EVP_PKEY_free(keys->key[i].pkey);
	free(keys);
}
