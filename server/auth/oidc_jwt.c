/* oidc_jwt.c - ID token verification; see oidc_jwt.h. */
#include "auth/oidc_jwt.h"

#include <openssl/bn.h>
#include <openssl/ecdsa.h>
#include <stdlib.h>
#include <string.h>

#include "labd/crypto.h"

#define SIG_MAX 1024     /* an 8192-bit RSA signature */
#define PART_MAX 12288   /* a decoded header or payload */

static const struct {
	const char *code, *text;
} results[] = {
	[OIDC_JWT_OK] = {"ok", "the ID token is valid"},
	[OIDC_JWT_MALFORMED] = {"malformed_token", "the identity provider sent a malformed ID token"},
	[OIDC_JWT_ALG] = {"bad_algorithm", "the ID token is signed with an algorithm labd does not accept (RS256 and ES256 only)"},
	[OIDC_JWT_UNKNOWN_KEY] = {"unknown_key", "the ID token is signed with a key the identity provider does not publish"},
	[OIDC_JWT_SIGNATURE] = {"bad_signature", "the ID token's signature does not verify"},
	[OIDC_JWT_ISSUER] = {"wrong_issuer", "the ID token comes from another issuer"},
	[OIDC_JWT_AUDIENCE] = {"wrong_audience", "the ID token was issued for another client"},
	[OIDC_JWT_EXPIRED] = {"expired", "the ID token has expired"},
	[OIDC_JWT_IAT] = {"bad_issue_time", "the ID token's issue time is missing or in the future"},
	[OIDC_JWT_NONCE] = {"nonce_mismatch", "the ID token does not belong to this sign-in (nonce mismatch)"},
	[OIDC_JWT_SUBJECT] = {"no_subject", "the ID token names no subject"},
};

const char *oidc_jwt_result_text(enum oidc_jwt_result res)
{
	return (size_t)res < sizeof(results) / sizeof(results[0]) ? results[res].text : "?";
}

const char *oidc_jwt_result_code(enum oidc_jwt_result res)
{
	return (size_t)res < sizeof(results) / sizeof(results[0]) ? results[res].code : "?";
}

/* A base64url part of JSON, decoded and parsed; NULL when it is not an object. */
static json_t *part_json(const char *start, size_t len)
{
	char *text = len < PART_MAX * 2 ? strndup(start, len) : NULL;
	unsigned char *raw = malloc(PART_MAX);
	json_t *v = NULL;
	int n;

	if (text && raw && (n = crypto_b64url_decode(text, raw, PART_MAX)) > 0)
		v = json_loadb((const char *)raw, (size_t)n, JSON_REJECT_DUPLICATES, NULL);
	if (v && !json_is_object(v)) {
		json_decref(v);
		v = NULL;
	}
	free(text);
	free(raw);
	return v;
}

/* JWS ES256 signatures are r || s (RFC 7518 3.4); OpenSSL verifies DER. */
static int ecdsa_der(const unsigned char *sig, size_t len, unsigned char **der)
{
	ECDSA_SIG *es = ECDSA_SIG_new();
	BIGNUM *r = BN_bin2bn(sig, 32, NULL), *s = BN_bin2bn(sig + 32, 32, NULL);
	int n = -1;

	if (len == 64 && es && r && s && ECDSA_SIG_set0(es, r, s) == 1) {
		r = s = NULL; /* owned by es now */
		n = i2d_ECDSA_SIG(es, der);
	}
	BN_free(r);
	BN_free(s);
	ECDSA_SIG_free(es);
	return n;
}

static bool signature_ok(const struct oidc_key *key, const char *signed_part, size_t signed_len,
			 const unsigned char *sig, size_t siglen)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char *der = NULL;
	bool ok = false;

	if (key->type == OIDC_KEY_EC_P256) {
		int n = ecdsa_der(sig, siglen, &der);
		if (n <= 0)
			goto out;
		sig = der;
		siglen = (size_t)n;
	}
	ok = md && EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key->pkey) == 1 &&
	     EVP_DigestVerify(md, sig, siglen, (const unsigned char *)signed_part, signed_len) == 1;
out:
	OPENSSL_free(der);
	EVP_MD_CTX_free(md);
	return ok;
}

/* OIDC Core 3.1.3.7 items 3-5: aud holds the client; with several audiences
 * azp must name it. */
static bool audience_ok(const json_t *claims, const char *client_id)
{
	const json_t *aud = json_object_get(claims, "aud");
	const char *azp = json_string_value(json_object_get(claims, "azp"));
	bool found = false;
	size_t i;
	json_t *one;

	if (json_is_string(aud))
		found = !strcmp(json_string_value(aud), client_id);
	else if (json_is_array(aud))
		json_array_foreach(aud, i, one) found |= json_is_string(one) &&
							  !strcmp(json_string_value(one), client_id);
	if (!found)
		return false;
	if (azp && strcmp(azp, client_id) != 0)
		return false;
	return !json_is_array(aud) || json_array_size(aud) == 1 || azp;
}

static enum oidc_jwt_result claims_check(const json_t *claims, const struct oidc_expect *want)
{
	const char *iss = json_string_value(json_object_get(claims, "iss"));
	const char *nonce = json_string_value(json_object_get(claims, "nonce"));
	const char *sub = json_string_value(json_object_get(claims, "sub"));
	const json_t *exp = json_object_get(claims, "exp"), *iat = json_object_get(claims, "iat");

	if (!iss || strcmp(iss, want->issuer) != 0)
		return OIDC_JWT_ISSUER;
	if (!audience_ok(claims, want->client_id))
		return OIDC_JWT_AUDIENCE;
	if (!json_is_number(exp) || json_number_value(exp) + (double)want->skew_s < (double)want->now_s)
		return OIDC_JWT_EXPIRED;
	if (!json_is_number(iat) || json_number_value(iat) > (double)(want->now_s + want->skew_s))
		return OIDC_JWT_IAT;
	if (!nonce || !want->nonce || strlen(nonce) != strlen(want->nonce) ||
	    !crypto_equal(nonce, want->nonce, strlen(nonce)))
		return OIDC_JWT_NONCE;
	if (!sub || !*sub)
		return OIDC_JWT_SUBJECT;
	return OIDC_JWT_OK;
}

/* The header's alg and kid lead to a key; the signature over "header.payload". */
static enum oidc_jwt_result header_and_signature(const char *token, const char *dot1,
						 const char *dot2, const struct oidc_keys *keys)
{
	json_t *header = part_json(token, (size_t)(dot1 - token));
	const char *alg = json_string_value(json_object_get(header, "alg"));
	const json_t *kid = json_object_get(header, "kid");
	const struct oidc_key *key;
	enum oidc_jwt_result res;
	unsigned char *buf = NULL;
	int siglen;

	if (!header || json_object_get(header, "crit") || (kid && !json_is_string(kid))) {
		res = OIDC_JWT_MALFORMED;
	} else if (!alg || (strcmp(alg, "RS256") != 0 && strcmp(alg, "ES256") != 0)) {
		res = OIDC_JWT_ALG;
	} else if (!(key = oidc_keys_find(keys, kid ? json_string_value(kid) : NULL, alg))) {
		res = OIDC_JWT_UNKNOWN_KEY;
	} else if (!(buf = malloc(SIG_MAX)) ||
		   (siglen = crypto_b64url_decode(dot2 + 1, buf, SIG_MAX)) <= 0) {
		res = OIDC_JWT_MALFORMED;
	} else {
		res = signature_ok(key, token, (size_t)(dot2 - token), buf, (size_t)siglen)
			      ? OIDC_JWT_OK
			      : OIDC_JWT_SIGNATURE;
	}
	free(buf);
	json_decref(header);
	return res;
}

enum oidc_jwt_result oidc_jwt_verify(const char *token, const struct oidc_keys *keys,
				     const struct oidc_expect *want, json_t **claims)
{
	const char *dot1 = token ? strchr(token, '.') : NULL;
	const char *dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
	enum oidc_jwt_result res;

	*claims = NULL;
	if (!dot2 || strchr(dot2 + 1, '.') || strlen(token) > OIDC_JWT_MAX)
		return OIDC_JWT_MALFORMED;
	if ((res = header_and_signature(token, dot1, dot2, keys)) != OIDC_JWT_OK)
		return res;
	json_t *payload = part_json(dot1 + 1, (size_t)(dot2 - dot1 - 1));
	if (!payload)
		return OIDC_JWT_MALFORMED;
	if ((res = claims_check(payload, want)) != OIDC_JWT_OK) {
		json_decref(payload);
		return res;
	}
	*claims = payload;
	return OIDC_JWT_OK;
}
