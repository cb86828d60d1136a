/* sign.c - HMAC-SHA256 of a delivery; see sign.h. */
#include "notify/sign.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <stdio.h>
#include <string.h>

int notify_sign(const char *secret, int64_t timestamp, const char *body, size_t len,
		char out[NOTIFY_SIGNATURE_HEX + 1])
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int mac_len = 0;
	char prefix[32];
	int n = snprintf(prefix, sizeof(prefix), "%" PRId64 ".", timestamp);
	EVP_MAC *hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *ctx = hmac ? EVP_MAC_CTX_new(hmac) : NULL;
	OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", (char *)"SHA256", 0),
			       OSSL_PARAM_construct_end()};
	size_t got = 0;
	int rc = -EIO;

	if (ctx && EVP_MAC_init(ctx, (const unsigned char *)secret, strlen(secret), params) &&
	    EVP_MAC_update(ctx, (const unsigned char *)prefix, (size_t)n) &&
	    EVP_MAC_update(ctx, (const unsigned char *)body, len) &&
	    EVP_MAC_final(ctx, mac, &got, sizeof(mac)) && got == 32) {
		mac_len = (unsigned)got;
		for (unsigned i = 0; i < mac_len; i++)
			snprintf(out + 2 * i, 3, "%02x", mac[i]);
		rc = 0;
	}
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(hmac);
	return rc;
}
