/* send.c - one delivery attempt through libcurl; see send.h. */
#include "notify/send.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "labd/clock.h"
#include "notify/sign.h"
#include "notify/target.h"

/* What the opensocket callback decided, for the error message. */
struct gate {
	const char *deny;
	bool refused;
	char why[160];
};

/* libcurl asks here for each socket it connects with, after resolving and
 * with the very address it will connect to: a denied one gets no socket,
 * so neither a name that resolves to it nor a second resolution reaches it. */
static curl_socket_t open_socket(void *ctx, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct gate *g = ctx;

	if (purpose != CURLSOCKTYPE_IPCXN ||
	    !notify_address_allowed(&a->addr, g->deny, g->why, sizeof(g->why))) {
		if (purpose != CURLSOCKTYPE_IPCXN)
			snprintf(g->why, sizeof(g->why), "not a plain connection");
		g->refused = true;
		return CURL_SOCKET_BAD;
	}
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

/* The answer's body is not kept: only its status matters. */
static size_t discard(char *data, size_t size, size_t n, void *ctx)
{
	(void)data;
	(void)ctx;
	return size * n;
}

static struct curl_slist *headers(const struct notify_request *rq, int64_t ts, const char *sig)
{
	char line[160];
	struct curl_slist *h = NULL, *t;
	const char *fixed[] = {"Content-Type: application/json", "Expect:", NULL};

	for (int i = 0; fixed[i]; i++)
		if (!(t = curl_slist_append(h, fixed[i])))
			goto fail;
		else
			h = t;
	snprintf(line, sizeof(line), "X-Labd-Event: %s", rq->event);
	if (!(t = curl_slist_append(h, line)))
		goto fail;
	h = t;
	snprintf(line, sizeof(line), "X-Labd-Delivery: %" PRId64, rq->delivery_id);
	if (!(t = curl_slist_append(h, line)))
		goto fail;
	h = t;
	snprintf(line, sizeof(line), "X-Labd-Timestamp: %" PRId64, ts);
	if (!(t = curl_slist_append(h, line)))
		goto fail;
	h = t;
	snprintf(line, sizeof(line), "X-Labd-Signature: sha256=%s", sig);
	if (!(t = curl_slist_append(h, line)))
		goto fail;
	return t;
fail:
	curl_slist_free_all(h);
	return NULL;
}

static void setup(CURL *c, const struct notify_request *rq, struct gate *g,
		  struct curl_slist *h)
{
	curl_easy_setopt(c, CURLOPT_URL, rq->url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_PROXY, ""); /* never http_proxy from the environment */
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)rq->timeout_s * 1000);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
			 rq->timeout_s < 5 ? (long)rq->timeout_s * 1000 : 5000L);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, g);
	curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "labd-webhook/" LABD_VERSION);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, rq->body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(rq->body));
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
}

void notify_send(const struct notify_request *rq, struct notify_result *res)
{
	struct gate g = {.deny = rq->deny};
	char sig[NOTIFY_SIGNATURE_HEX + 1];
	int64_t ts = time(NULL), start = clock_ms();
	struct curl_slist *h = NULL;
	CURL *c = NULL;
	CURLcode cc;
	long status = 0;

	memset(res, 0, sizeof(*res));
	if (notify_sign(rq->secret, ts, rq->body, strlen(rq->body), sig) < 0 ||
	    !(h = headers(rq, ts, sig)) || !(c = curl_easy_init())) {
		snprintf(res->error, sizeof(res->error), "could not prepare the request");
		goto out;
	}
	setup(c, rq, &g, h);
	cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	res->status = (int)status;
	if (cc != CURLE_OK && g.refused) {
		res->refused = true;
		snprintf(res->error, sizeof(res->error), "refused: %s", g.why);
	} else if (cc != CURLE_OK) {
		snprintf(res->error, sizeof(res->error), "%s", curl_easy_strerror(cc));
	}
out:
	res->duration_ms = clock_ms() - start;
	curl_easy_cleanup(c);
	curl_slist_free_all(h);
}
