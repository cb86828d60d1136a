/* crypto.h - the few cryptographic primitives labd needs, all from OpenSSL. */
#ifndef LABD_CRYPTO_H
#define LABD_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>

/* Fills buf with len bytes from the CSPRNG; -1 if it failed (never partial use). */
int crypto_random(void *buf, size_t len);
/* A fresh random secret of `bytes` bytes as unpadded base64url into out
 * (outlen >= 4*bytes/3+2); -1 on failure. 32 bytes give 43 characters. */
int crypto_random_token(char *out, size_t outlen, size_t bytes);
/* SHA-256 of len bytes into out[32]. */
void crypto_sha256(const void *data, size_t len, unsigned char out[32]);
/* len bytes as 2*len lowercase hex digits + NUL into out. */
void crypto_hex(const unsigned char *in, size_t len, char *out);
/* SHA-256 of text as 64 lowercase hex digits + NUL into out[65]. */
void crypto_sha256_hex(const char *text, char out[65]);
/* Unpadded base64url of len bytes into out; -1 if outlen is too small. */
int crypto_b64url(const unsigned char *in, size_t len, char *out, size_t outlen);
/* Decodes unpadded base64url; returns the byte count or -1 on bad input/size. */
int crypto_b64url_decode(const char *in, unsigned char *out, size_t outlen);
/* Constant-time equality of two equal-length buffers. */
bool crypto_equal(const void *a, const void *b, size_t len);

#endif
