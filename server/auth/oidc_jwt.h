/* oidc_jwt.h - an ID token (a JWS in compact form, RFC 7515) checked as OpenID
 * Connect Core 3.1.3.7 asks: RS256 or ES256 signature by one of the provider's
 * keys, iss, aud (and azp), exp and iat within a bounded clock skew, nonce,
 * sub. Pure: the keys and the time are arguments. */
#ifndef LABD_OIDC_JWT_H
#define LABD_OIDC_JWT_H

#include <jansson.h>
#include <stdint.h>

#include "auth/oidc_keys.h"

#define OIDC_JWT_MAX 16384 /* longest ID token taken */

enum oidc_jwt_result {
	OIDC_JWT_OK,
	OIDC_JWT_MALFORMED,   /* not three base64url parts of JSON, or a "crit" header */
	OIDC_JWT_ALG,         /* an algorithm other than RS256 and ES256 ("none" too) */
	OIDC_JWT_UNKNOWN_KEY, /* no key of the set fits its kid and alg */
	OIDC_JWT_SIGNATURE,   /* the signature does not verify */
	OIDC_JWT_ISSUER,
	OIDC_JWT_AUDIENCE,    /* not for this client (aud, or azp with several audiences) */
	OIDC_JWT_EXPIRED,     /* exp passed by more than the skew */
	OIDC_JWT_IAT,         /* iat missing or ahead of the clock by more than the skew */
	OIDC_JWT_NONCE,       /* not the nonce of this sign-in */
	OIDC_JWT_SUBJECT      /* no sub */
};

/* What the token must say. */
struct oidc_expect {
	const char *issuer;    /* exactly the discovered issuer */
	const char *client_id;
	const char *nonce;
	int64_t now_s, skew_s;
};

/* Checks token with keys: OIDC_JWT_OK and *claims (a new reference the caller
 * drops) when every check passes; *claims NULL otherwise. The signature is
 * checked before any claim is read. */
enum oidc_jwt_result oidc_jwt_verify(const char *token, const struct oidc_keys *keys,
				     const struct oidc_expect *want, json_t **claims);
/* A short sentence for a result, as the refusal page says it. */
const char *oidc_jwt_result_text(enum oidc_jwt_result res);
/* The result's code for logs, audits and error bodies, e.g. "bad_signature". */
const char *oidc_jwt_result_code(enum oidc_jwt_result res);

#endif
