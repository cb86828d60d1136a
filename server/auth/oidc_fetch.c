/* oidc_fetch.c - the back channel through libcurl; see oidc_fetch.h. */
#include "auth/oidc_fetch.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "http/workers.h"
#include "labd/buf.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int running; /* calls in progress */

/* curl_global_init is not thread-safe: once, before any call. */
static void global_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static size_t on_data(char *data, size_t size, size_t n, void *ctx)
{
	/* A short count makes libcurl stop with CURLE_WRITE_ERROR: the bound. */
	return buf_add(ctx, data, size * n) == 0 ? size * n : 0;
}

/* RFC 6749 2.3.1: the client id and secret are form-encoded before Basic. */
static int set_client_auth(CURL *c, const struct oidc_request *rq)
{
	char *user = curl_easy_escape(c, rq->user, 0);
	char *password = curl_easy_escape(c, rq->password ? rq->password : "", 0);
	int rc = user && password && curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC) == CURLE_OK &&
			 curl_easy_setopt(c, CURLOPT_USERNAME, user) == CURLE_OK &&
			 curl_easy_setopt(c, CURLOPT_PASSWORD, password) == CURLE_OK
		 ? 0
		 : -1;
	curl_free(user);
	curl_free(password);
	return rc;
}

static CURLcode perform(CURL *c, const struct oidc_request *rq, struct buf *body,
			struct curl_slist *headers)
{
	long ms = (long)rq->timeout_s * 1000;

	curl_easy_setopt(c, CURLOPT_URL, rq->url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for DNS */
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms < 3000 ? ms : 3000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "labd/" LABD_VERSION);
	if (rq->form)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, rq->form);
	if (rq->user && set_client_auth(c, rq) < 0)
		return CURLE_OUT_OF_MEMORY;
	/* up to the timeout: meanwhile other workers take this one's new connections */
	workers_blocking(true);
	CURLcode cc = curl_easy_perform(c);
	workers_blocking(false);
	return cc;
}

int oidc_fetch(const struct oidc_request *rq, long *status, json_t **out, char *err,
	       size_t errlen)
{
	struct curl_slist *headers = curl_slist_append(NULL, "Accept: application/json");
	struct buf body;
	CURL *c = NULL;
	CURLcode cc;
	int rc = -EIO;

	*out = NULL;
	*status = 0;
	pthread_once(&once, global_init);
	if (__atomic_add_fetch(&running, 1, __ATOMIC_SEQ_CST) > OIDC_FETCH_MAX_CALLS) {
		snprintf(err, errlen, "%d calls to the identity provider already wait",
			 OIDC_FETCH_MAX_CALLS);
		__atomic_sub_fetch(&running, 1, __ATOMIC_SEQ_CST);
		curl_slist_free_all(headers);
		return -EBUSY;
	}
	buf_init(&body, OIDC_FETCH_MAX_BYTES);
	if (!headers || !(c = curl_easy_init())) {
		snprintf(err, errlen, "out of memory");
	} else if ((cc = perform(c, rq, &body, headers)) != CURLE_OK) {
		snprintf(err, errlen, "%s: %s", rq->url,
			 cc == CURLE_WRITE_ERROR ? "answer too large" : curl_easy_strerror(cc));
	} else {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
		*out = json_loadb(body.data ? body.data : "", body.len, 0, NULL);
		if (json_is_object(*out)) {
			rc = 0;
		} else {
			json_decref(*out);
			*out = NULL;
			snprintf(err, errlen, "%s: HTTP %ld without a JSON object", rq->url, *status);
		}
	}
	curl_easy_cleanup(c);
	curl_slist_free_all(headers);
	buf_release(&body);
	__atomic_sub_fetch(&running, 1, __ATOMIC_SEQ_CST);
	return rc;
}
