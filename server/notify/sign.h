/* sign.h - the signature of a delivery (docs/jobs.md "Notifications"):
 * HMAC-SHA256 with the webhook's secret over "<timestamp>.<body>", as 64
 * lowercase hex digits; sent as "X-Labd-Signature: sha256=<hex>" beside
 * "X-Labd-Timestamp: <timestamp>" (Unix seconds). The timestamp is signed so
 * that a receiver can refuse an old body sent again. */
#ifndef LABD_NOTIFY_SIGN_H
#define LABD_NOTIFY_SIGN_H

#include <stddef.h>
#include <stdint.h>

#define NOTIFY_SIGNATURE_HEX 64

/* Pure: the signature of body (len bytes) at timestamp into out. 0, or -EIO
 * when OpenSSL failed. */
int notify_sign(const char *secret, int64_t timestamp, const char *body, size_t len,
		char out[NOTIFY_SIGNATURE_HEX + 1]);

#endif
