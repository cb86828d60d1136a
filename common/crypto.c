/* crypto.c - random secrets, SHA-256 and base64url through OpenSSL. */
#include "labd/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <string.h>

int crypto_random(void *buf, size_t len)
{
	return RAND_bytes(buf, (int)len) == 1 ? 0 : -1;
}

int crypto_b64url(const unsigned char *in, size_t len, char *out, size_t outlen)
{
	static const char alphabet[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t need = (len * 4 + 2) / 3 + 1, o = 0;
	uint32_t acc = 0;
	int bits = 0;

	if (outlen < need)
		return -1;
	for (size_t i = 0; i < len; i++) {
		acc = (acc << 8) | in[i];
		bits += 8;
		while (bits >= 6) {
			bits -= 6;
			out[o++] = alphabet[(acc >> bits) & 63];
		}
	}
	if (bits > 0)
		out[o++] = alphabet[(acc << (6 - bits)) & 63];
	out[o] = '\0';
	return 0;
}

static int b64url_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '-')
		return 62;
	if (c == '_')
		return 63;
	return -1;
}

int crypto_b64url_decode(const char *in, unsigned char *out, size_t outlen)
{
	uint32_t acc = 0;
	int bits = 0;
	size_t o = 0;

	for (; *in; in++) {
		int v = b64url_value(*in);
		if (v < 0)
			return -1;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (o >= outlen)
				return -1;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	return (int)o;
}

int crypto_random_token(char *out, size_t outlen, size_t bytes)
{
	unsigned char raw[64];

	if (bytes > sizeof(raw) || crypto_random(raw, bytes) < 0)
		return -1;
	int rc = crypto_b64url(raw, bytes, out, outlen);
	OPENSSL_cleanse(raw, sizeof(raw));
	return rc;
}

/* SHA-256 fetched from the provider once: an implicit fetch on every
 * EVP_Digest was most of the cost of hashing a short secret. */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void)
{
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

/* A digest context per thread, reused: no allocation per hash. Freed only
 * with its thread (the web process's workers live as long as the process). */
static _Thread_local EVP_MD_CTX *sha256_ctx;

void crypto_sha256(const void *data, size_t len, unsigned char out[32])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	const EVP_MD *type;

	pthread_once(&sha256_once, sha256_fetch);
	type = sha256_md ? sha256_md : EVP_sha256();
	if (!sha256_ctx)
		sha256_ctx = EVP_MD_CTX_new();
	if (!sha256_ctx || !EVP_DigestInit_ex2(sha256_ctx, type, NULL) ||
	    !EVP_DigestUpdate(sha256_ctx, data, len) ||
	    !EVP_DigestFinal_ex(sha256_ctx, md, &mdlen))
		EVP_Digest(data, len, md, &mdlen, type, NULL);
	memcpy(out, md, 32);
}

void crypto_hex(const unsigned char *in, size_t len, char *out)
{
	static const char hex[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = hex[in[i] >> 4];
		out[2 * i + 1] = hex[in[i] & 15];
	}
	out[2 * len] = '\0';
}

void crypto_sha256_hex(const char *text, char out[65])
{
	unsigned char md[32];

	crypto_sha256(text, strlen(text), md);
	crypto_hex(md, sizeof(md), out);
}

bool crypto_equal(const void *a, const void *b, size_t len)
{
	return CRYPTO_memcmp(a, b, len) == 0;
}
