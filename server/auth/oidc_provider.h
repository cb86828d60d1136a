/* oidc_provider.h - what labd knows of its OpenID Provider: the discovery
 * document (/.well-known/openid-configuration) and the signing keys (jwks_uri),
 * fetched through oidc_fetch.c and cached. Both are fetched first by a thread
 * of their own when labd-web starts (off the request path), again after
 * [oidc] cache, and the keys at once when a token names a key id the set lacks
 * (the provider rotated), at most once per [oidc] keys_refetch. Thread-safe. */
#ifndef LABD_OIDC_PROVIDER_H
#define LABD_OIDC_PROVIDER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "auth/oidc_jwt.h"

#define OIDC_URL_MAX 512

struct oidc_provider;

/* The endpoints of the discovery document. */
struct oidc_endpoints {
	char authorization[OIDC_URL_MAX];
	char token[OIDC_URL_MAX];
	char jwks[OIDC_URL_MAX];
	char end_session[OIDC_URL_MAX]; /* "" when the provider advertises none */
};

struct oidc_provider_settings {
	const char *issuer;
	int64_t timeout_s, cache_s, keys_refetch_s;
};

/* A provider for s (copied), with its first fetch started in a thread; NULL
 * when out of memory. Free with oidc_provider_free (joins that thread). */
struct oidc_provider *oidc_provider_new(const struct oidc_provider_settings *s);
void oidc_provider_free(struct oidc_provider *p);
/* The discovered endpoints into *out (fetching them when none are cached or
 * the cache is old): 0, or a negative errno with err saying why. */
int oidc_provider_endpoints(struct oidc_provider *p, struct oidc_endpoints *out, char *err,
			    size_t errlen);
/* Verifies token (oidc_jwt_verify, want->issuer set here) with the cached keys,
 * refetched once on an unknown key id when the last fetch is older than
 * keys_refetch. Returns the oidc_jwt_result, or a negative errno (err says
 * why) when no keys could be had. */
int oidc_provider_verify(struct oidc_provider *p, const char *token, struct oidc_expect *want,
			 json_t **claims, char *err, size_t errlen);

#endif
