/* oidc_provider.c - discovery and the key set, cached; see oidc_provider.h.
 * Network calls run without the lock held: two threads may fetch at once
 * (bounded by oidc_fetch's cap), and the last to finish is kept. */
#include "auth/oidc_provider.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth/oidc_fetch.h"
#include "labd/log.h"
#include "labd/str.h"

#define WELL_KNOWN "/.well-known/openid-configuration"

struct oidc_provider {
	char issuer[OIDC_URL_MAX];
	int64_t timeout_s, cache_s, keys_refetch_s;
	pthread_mutex_t lock;
	struct oidc_endpoints ends; /* valid when ends_at > 0 */
	int64_t ends_at;            /* when discovery was fetched */
	struct oidc_keys *keys;     /* NULL until fetched */
	int64_t keys_at;            /* when the keys were last fetched (or tried) */
	pthread_t first;
	bool first_started;
};

static int64_t now_s(void)
{
	return (int64_t)time(NULL);
}

static int copy_url(const json_t *doc, const char *name, char *out, bool required)
{
	const char *v = json_string_value(json_object_get(doc, name));

	if (!v)
		return required ? -1 : 0;
	/* only http(s) URLs: they are handed to libcurl and to browsers */
	if (strncmp(v, "https://", 8) != 0 && strncmp(v, "http://", 7) != 0)
		return -1;
	return str_copy(out, OIDC_URL_MAX, v) < 0 ? -1 : 0;
}

/* OpenID Connect Discovery 4.3: the document's issuer must be exactly the one
 * configured, or a rogue document could name another issuer's tokens. */
static int discover(struct oidc_provider *p, struct oidc_endpoints *out, char *err, size_t errlen)
{
	char url[OIDC_URL_MAX + sizeof(WELL_KNOWN)];
	size_t len = strlen(p->issuer);
	struct oidc_request rq = {.url = url, .timeout_s = p->timeout_s};
	json_t *doc;
	long status;
	int rc;

	/* an issuer with a trailing "/" gets no second one */
	snprintf(url, sizeof(url), "%.*s%s", (int)(len && p->issuer[len - 1] == '/' ? len - 1 : len),
		 p->issuer, WELL_KNOWN);
	if ((rc = oidc_fetch(&rq, &status, &doc, err, errlen)) < 0)
		return rc;
	const char *iss = json_string_value(json_object_get(doc, "issuer"));
	memset(out, 0, sizeof(*out));
	if (status != 200) {
		snprintf(err, errlen, "%s answered HTTP %ld", url, status);
		rc = -EIO;
	} else if (!iss || strcmp(iss, p->issuer) != 0) {
		snprintf(err, errlen, "%s names issuer \"%s\", not \"%s\"", url, iss ? iss : "",
			 p->issuer);
		rc = -EIO;
	} else if (copy_url(doc, "authorization_endpoint", out->authorization, true) < 0 ||
		   copy_url(doc, "token_endpoint", out->token, true) < 0 ||
		   copy_url(doc, "jwks_uri", out->jwks, true) < 0 ||
		   copy_url(doc, "end_session_endpoint", out->end_session, false) < 0) {
		snprintf(err, errlen, "%s lacks an endpoint or names one that is not an http(s) URL",
			 url);
		rc = -EIO;
	}
	json_decref(doc);
	return rc;
}

int oidc_provider_endpoints(struct oidc_provider *p, struct oidc_endpoints *out, char *err,
			    size_t errlen)
{
	struct oidc_endpoints fresh;
	int rc;

	pthread_mutex_lock(&p->lock);
	bool have = p->ends_at > 0, recent = have && now_s() - p->ends_at < p->cache_s;
	if (have)
		*out = p->ends;
	pthread_mutex_unlock(&p->lock);
	if (recent)
		return 0;
	if ((rc = discover(p, &fresh, err, errlen)) < 0) {
		if (!have)
			return rc;
		/* an old document beats none while the provider is away */
		log_warn("oidc: discovery failed, the cached endpoints stay: %s", err);
		return 0;
	}
	pthread_mutex_lock(&p->lock);
	p->ends = fresh;
	p->ends_at = now_s();
	pthread_mutex_unlock(&p->lock);
	*out = fresh;
	return 0;
}

/* Fetches the key set and makes it the current one. */
static int fetch_keys(struct oidc_provider *p, char *err, size_t errlen)
{
	struct oidc_endpoints ends;
	struct oidc_request rq = {.url = ends.jwks, .timeout_s = p->timeout_s};
	struct oidc_keys *keys = NULL, *old;
	json_t *doc;
	long status;
	int rc;

	if ((rc = oidc_provider_endpoints(p, &ends, err, errlen)) < 0)
		return rc;
	if ((rc = oidc_fetch(&rq, &status, &doc, err, errlen)) < 0)
		return rc;
	if (status != 200 || !(keys = oidc_keys_parse(doc))) {
		snprintf(err, errlen, "%s: HTTP %ld without a JWK Set", ends.jwks, status);
		json_decref(doc);
		return -EIO;
	}
	json_decref(doc);
	if (keys->n == 0)
		log_warn("oidc: %s holds no RS256 or ES256 signing key", ends.jwks);
	pthread_mutex_lock(&p->lock);
	old = p->keys;
	p->keys = keys;
	p->keys_at = now_s();
	pthread_mutex_unlock(&p->lock);
	oidc_keys_unref(old);
	return 0;
}

/* The current keys (a reference the caller drops), fetched when missing or old. */
static struct oidc_keys *current_keys(struct oidc_provider *p, char *err, size_t errlen)
{
	struct oidc_keys *keys;

	pthread_mutex_lock(&p->lock);
	bool stale = !p->keys || now_s() - p->keys_at >= p->cache_s;
	pthread_mutex_unlock(&p->lock);
	if (stale && fetch_keys(p, err, errlen) < 0)
		log_warn("oidc: fetching the signing keys failed: %s", err);
	pthread_mutex_lock(&p->lock);
	keys = oidc_keys_ref(p->keys);
	pthread_mutex_unlock(&p->lock);
	return keys;
}

/* A rotation: the token's key is newer than the set. Refetched once per
 * keys_refetch, so tokens with made-up key ids cannot make labd hammer the
 * provider. True when a fetch was made. */
static bool refetch_for_unknown_key(struct oidc_provider *p)
{
	char err[256];

	pthread_mutex_lock(&p->lock);
	bool due = now_s() - p->keys_at >= p->keys_refetch_s;
	if (due)
		p->keys_at = now_s(); /* counts as the attempt, even if it fails */
	pthread_mutex_unlock(&p->lock);
	if (!due)
		return false;
	if (fetch_keys(p, err, sizeof(err)) < 0) {
		log_warn("oidc: refetching the signing keys failed: %s", err);
		return false;
	}
	return true;
}

int oidc_provider_verify(struct oidc_provider *p, const char *token, struct oidc_expect *want,
			 json_t **claims, char *err, size_t errlen)
{
	struct oidc_keys *keys = current_keys(p, err, errlen);
	enum oidc_jwt_result res;

	*claims = NULL;
	if (!keys)
		return -EIO;
	want->issuer = p->issuer;
	res = oidc_jwt_verify(token, keys, want, claims);
	oidc_keys_unref(keys);
	if (res != OIDC_JWT_UNKNOWN_KEY || !refetch_for_unknown_key(p))
		return (int)res;
	if (!(keys = current_keys(p, err, errlen)))
		return -EIO;
	res = oidc_jwt_verify(token, keys, want, claims);
	oidc_keys_unref(keys);
	return (int)res;
}

static void *first_fetch(void *arg)
{
	struct oidc_provider *p = arg;
	char err[256];

	if (fetch_keys(p, err, sizeof(err)) < 0)
		log_warn("oidc: the identity provider could not be reached yet: %s", err);
	else
		log_info("oidc: discovered %s and its signing keys", p->issuer);
	return NULL;
}

struct oidc_provider *oidc_provider_new(const struct oidc_provider_settings *s)
{
	struct oidc_provider *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	str_copy(p->issuer, sizeof(p->issuer), s->issuer);
	p->timeout_s = s->timeout_s;
	p->cache_s = s->cache_s;
	p->keys_refetch_s = s->keys_refetch_s;
	pthread_mutex_init(&p->lock, NULL);
	p->first_started = pthread_create(&p->first, NULL, first_fetch, p) == 0;
	return p;
}

void oidc_provider_free(struct oidc_provider *p)
{
	if (!p)
		return;
	if (p->first_started)
		pthread_join(p->first, NULL);
	oidc_keys_unref(p->keys);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
