/* Unit tests: ID token verification (server/auth/oidc_jwt.c) and the JWK Set
 * reader (oidc_keys.c) with keys made here by OpenSSL: RS256 and ES256
 * signatures, each claim check, and the keys a set must skip. */
#include "unit.h"

#include <jansson.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>

#include "auth/oidc_jwt.h"
#include "auth/oidc_keys.h"
#include "labd/crypto.h"

#define NOW 1800000000LL
#define ISSUER "https://idp.example"

static EVP_PKEY *rsa, *rsa_other, *ec, *rsa_small;

static void b64(const unsigned char *in, size_t len, char *out, size_t outlen)
{
	assert_int_equal(crypto_b64url(in, len, out, outlen), 0);
}

static json_t *rsa_jwk(EVP_PKEY *k, const char *kid)
{
	BIGNUM *n = NULL, *e = NULL;
	unsigned char nb[1024], eb[8];
	char ns[1400], es[16];

	assert_int_equal(EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_RSA_N, &n), 1);
	assert_int_equal(EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_RSA_E, &e), 1);
	int nl = BN_bn2bin(n, nb), el = BN_bn2bin(e, eb);
	b64(nb, (size_t)nl, ns, sizeof(ns));
	b64(eb, (size_t)el, es, sizeof(es));
	BN_free(n);
	BN_free(e);
	return json_pack("{s:s,s:s,s:s,s:s,s:s}", "kty", "RSA", "use", "sig", "kid", kid, "n", ns,
			 "e", es);
}

static json_t *ec_jwk(EVP_PKEY *k, const char *kid, bool off_curve)
{
	unsigned char pt[65];
	char x[48], y[48];
	size_t len = 0;

	assert_int_equal(EVP_PKEY_get_octet_string_param(k, OSSL_PKEY_PARAM_PUB_KEY, pt, sizeof(pt),
							 &len),
			 1);
	assert_int_equal(len, 65);
	if (off_curve)
		pt[64] ^= 1;
	b64(pt + 1, 32, x, sizeof(x));
	b64(pt + 33, 32, y, sizeof(y));
	return json_pack("{s:s,s:s,s:s,s:s,s:s}", "kty", "EC", "crv", "P-256", "kid", kid, "x", x,
			 "y", y);
}

static struct oidc_keys *key_set(void)
{
	json_t *set = json_pack("{s:[o,o,{s:s,s:s}]}", "keys", rsa_jwk(rsa, "r1"),
				ec_jwk(ec, "e1", false), "kty", "oct", "k", "c2VjcmV0");
	struct oidc_keys *keys = oidc_keys_parse(set);
	json_decref(set);
	assert_non_null(keys);
	assert_int_equal(keys->n, 2); /* the symmetric key is skipped */
	return keys;
}

/* header.payload signed with k (alg from its type), as a compact JWS. */
static char *sign(EVP_PKEY *k, json_t *header, json_t *claims)
{
	char *h = json_dumps(header, JSON_COMPACT), *c = json_dumps(claims, JSON_COMPACT);
	char hb[1024], cb[2048], sb[1400], *out = malloc(6000);
	unsigned char sig[1024], raw[64];
	size_t siglen = sizeof(sig);
	EVP_MD_CTX *md = EVP_MD_CTX_new();

	b64((unsigned char *)h, strlen(h), hb, sizeof(hb));
	b64((unsigned char *)c, strlen(c), cb, sizeof(cb));
	snprintf(out, 6000, "%s.%s", hb, cb);
	assert_int_equal(EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, k), 1);
	assert_int_equal(EVP_DigestSign(md, sig, &siglen, (unsigned char *)out, strlen(out)), 1);
	if (EVP_PKEY_is_a(k, "EC")) { /* DER to r || s */
		const unsigned char *p = sig;
		ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)siglen);
		BN_bn2binpad(ECDSA_SIG_get0_r(es), raw, 32);
		BN_bn2binpad(ECDSA_SIG_get0_s(es), raw + 32, 32);
		ECDSA_SIG_free(es);
		memcpy(sig, raw, 64);
		siglen = 64;
	}
	b64(sig, siglen, sb, sizeof(sb));
	size_t used = strlen(out);
	snprintf(out + used, 6000 - used, ".%s", sb);
	EVP_MD_CTX_free(md);
	free(h);
	free(c);
	json_decref(header);
	json_decref(claims);
	return out;
}

static json_t *claims(void)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:I,s:I}", "iss", ISSUER, "aud", "labd", "sub", "u1",
			 "nonce", "n0nce", "iat", (json_int_t)NOW - 10, "exp", (json_int_t)NOW + 300);
}

static json_t *header(const char *alg, const char *kid)
{
	json_t *h = json_pack("{s:s,s:s}", "alg", alg, "typ", "JWT");
	if (kid)
		json_object_set_new(h, "kid", json_string(kid));
	return h;
}

static enum oidc_jwt_result check(const char *token)
{
	struct oidc_keys *keys = key_set();
	struct oidc_expect want = {.issuer = ISSUER, .client_id = "labd", .nonce = "n0nce",
				   .now_s = NOW, .skew_s = 60};
	json_t *out = NULL;
	enum oidc_jwt_result res = oidc_jwt_verify(token, keys, &want, &out);

	if (res == OIDC_JWT_OK)
		assert_string_equal(json_string_value(json_object_get(out, "sub")), "u1");
	else
		assert_null(out);
	json_decref(out);
	oidc_keys_unref(keys);
	return res;
}

static enum oidc_jwt_result check_with(EVP_PKEY *k, const char *alg, const char *kid,
				       json_t *c)
{
	char *token = sign(k, header(alg, kid), c);
	enum oidc_jwt_result res = check(token);
	free(token);
	return res;
}

static void test_rs256_and_es256_verify(void **state)
{
	(void)state;
	assert_int_equal(check_with(rsa, "RS256", "r1", claims()), OIDC_JWT_OK);
	assert_int_equal(check_with(ec, "ES256", "e1", claims()), OIDC_JWT_OK);
	/* no kid: the set's only key of the type */
	assert_int_equal(check_with(ec, "ES256", NULL, claims()), OIDC_JWT_OK);
}

static void test_signature_and_key_refusals(void **state)
{
	(void)state;
	assert_int_equal(check_with(rsa_other, "RS256", "r1", claims()), OIDC_JWT_SIGNATURE);
	assert_int_equal(check_with(rsa_other, "RS256", "r9", claims()), OIDC_JWT_UNKNOWN_KEY);
	/* a kid of another key type: never verified with the wrong algorithm */
	assert_int_equal(check_with(ec, "ES256", "r1", claims()), OIDC_JWT_UNKNOWN_KEY);
	assert_int_equal(check_with(rsa, "PS256", "r1", claims()), OIDC_JWT_ALG);
	assert_int_equal(check_with(rsa, "none", "r1", claims()), OIDC_JWT_ALG);
	assert_int_equal(check_with(rsa, "HS256", "r1", claims()), OIDC_JWT_ALG);
	/* a token cut or changed after signing */
	char *t = sign(rsa, header("RS256", "r1"), claims());
	char *dot = strchr(t, '.');
	dot[3] = dot[3] == 'A' ? 'B' : 'A';
	assert_int_equal(check(t), OIDC_JWT_SIGNATURE);
	*strrchr(t, '.') = '\0';
	assert_int_equal(check(t), OIDC_JWT_MALFORMED);
	free(t);
	assert_int_equal(check("a.b.c.d"), OIDC_JWT_MALFORMED);
	assert_int_equal(check(""), OIDC_JWT_MALFORMED);
	json_t *h = header("RS256", "r1");
	json_object_set_new(h, "crit", json_pack("[s]", "exp"));
	t = sign(rsa, h, claims());
	assert_int_equal(check(t), OIDC_JWT_MALFORMED);
	free(t);
}

static void test_claim_refusals(void **state)
{
	json_t *c;
	(void)state;

	c = claims();
	json_object_set_new(c, "iss", json_string("https://other.example"));
	assert_int_equal(check_with(rsa, "RS256", "r1", c), OIDC_JWT_ISSUER);
	c = claims();
	json_object_set_new(c, "aud", json_string("other"));
	assert_int_equal(check_with(rsa, "RS256", "r1", c), OIDC_JWT_AUDIENCE);
	c = claims();
	json_object_set_new(c, "aud", json_pack("[s,s]", "other", "labd"));
	assert_int_equal(check_with(rsa, "RS256", "r1", c), OIDC_JWT_AUDIENCE); /* no azp */
	c = claims();
	json_object_set_new(c, "aud", json_pack("[s,s]", "other", "labd"));
	json_object_set_new(c, "azp", json_string("labd"));
	assert_int_equal(check_with(rsa, "RS256", "r1", c), OIDC_JWT_OK);
	c = claims();
	json_object_set_new(c, "azp", json_string("other"));
	assert_int_equal(check_with(rsa, "RS256", "r1", c), OIDC_JWT_AUDIENCE);
	c = claims();
	json_object_set_new(c, "exp", json_integer(NOW - 61));
	assert_int_equal(check_with(rsa, "RS256", "r1", c), OIDC_JWT_EXPIRED);
	c = claims();
	json_object_set_new(c, "exp", json_integer(NOW - 59)); /* within the skew */
	assert_int_equal(check_with(rsa, "RS256", "r1", c), OIDC_JWT_OK);
	c = claims();
	json_object_del(c, "exp");
	assert_int_equal(check_with(rsa, "RS256", "r1", c), OIDC_JWT_EXPIRED);
	c = claims();
	json_object_set_new(c, "iat", json_integer(NOW + 61));
	assert_int_equal(check_with(rsa, "RS256", "r1", c), OIDC_JWT_IAT);
	c = claims();
	json_object_set_new(c, "nonce", json_string("other"));
	assert_int_equal(check_with(rsa, "RS256", "r1", c), OIDC_JWT_NONCE);
	c = claims();
	json_object_del(c, "nonce");
	assert_int_equal(check_with(rsa, "RS256", "r1", c), OIDC_JWT_NONCE);
	c = claims();
	json_object_set_new(c, "sub", json_string(""));
	assert_int_equal(check_with(rsa, "RS256", "r1", c), OIDC_JWT_SUBJECT);
}

static void test_key_set_skips_what_it_cannot_use(void **state)
{
	(void)state;
	json_t *set = json_pack("{s:[o,o,o,{s:s}]}", "keys", ec_jwk(ec, "bad-point", true),
				rsa_jwk(rsa_small, "small"), rsa_jwk(rsa, "r1"), "kty", "RSA");
	json_object_set_new(json_array_get(json_object_get(set, "keys"), 2), "use",
			    json_string("enc"));
	struct oidc_keys *keys = oidc_keys_parse(set);
	assert_non_null(keys);
	assert_int_equal(keys->n, 0); /* off the curve, under 2048 bits, for encryption, empty */
	oidc_keys_unref(keys);
	json_decref(set);
	assert_null(oidc_keys_parse(json_object_get(NULL, "x")));
}

static int setup(void **state)
{
	(void)state;
	rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
	rsa_other = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
	rsa_small = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)1024);
	ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	return rsa && rsa_other && rsa_small && ec ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	EVP_PKEY_free(rsa);
	EVP_PKEY_free(rsa_other);
	EVP_PKEY_free(rsa_small);
	EVP_PKEY_free(ec);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rs256_and_es256_verify),
		cmocka_unit_test(test_signature_and_key_refusals),
		cmocka_unit_test(test_claim_refusals),
		cmocka_unit_test(test_key_set_skips_what_it_cannot_use),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
