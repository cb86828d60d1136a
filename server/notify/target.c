/* target.c - a webhook's URL and the addresses a delivery may reach; see target.h. */
#include "notify/target.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "config/cidr.h"
#include "sandbox/egress.h"
#include "store/webhooks.h"

static bool printable_ascii(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
			return false;
	return true;
}

/* Parses url with libcurl's own parser, the one the delivery uses, so what
 * is checked here is what is connected to. */
static int parse(const char *url, char *host, size_t hostlen, char *why, size_t whylen)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *h = NULL, *user = NULL, *password = NULL, *fragment = NULL;
	int rc = -EINVAL;

	if (!u) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &h, 0) != CURLUE_OK) {
		snprintf(why, whylen, "must be an absolute http or https URL with a host");
	} else if (strcmp(scheme, "http") && strcmp(scheme, "https")) {
		snprintf(why, whylen, "must use http or https, not %.16s", scheme);
	} else if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK ||
		   curl_url_get(u, CURLUPART_PASSWORD, &password, 0) == CURLUE_OK) {
		snprintf(why, whylen, "must not carry a user or password (the signature is the proof)");
	} else if (curl_url_get(u, CURLUPART_FRAGMENT, &fragment, 0) == CURLUE_OK) {
		snprintf(why, whylen, "must not have a fragment (#...)");
	} else if (!h[0] || strlen(h) >= hostlen) {
		snprintf(why, whylen, "has no usable host");
	} else {
		/* IPv6 literals come back in brackets */
		size_t n = strlen(h);
		if (h[0] == '[' && n > 2 && h[n - 1] == ']')
			snprintf(host, hostlen, "%.*s", (int)(n - 2), h + 1);
		else
			snprintf(host, hostlen, "%s", h);
		rc = 0;
	}
	curl_free(scheme);
	curl_free(h);
	curl_free(user);
	curl_free(password);
	curl_free(fragment);
	curl_url_cleanup(u);
	return rc;
}

int notify_url_check(const char *url, char *host, size_t hostlen, bool *literal, char *why,
		     size_t whylen)
{
	unsigned char bin[16];
	size_t n = strlen(url);

	*literal = false;
	if (n < NOTIFY_URL_MIN || n > WEBHOOK_URL_MAX) {
		snprintf(why, whylen, "must be %d to %d characters long", NOTIFY_URL_MIN,
			 WEBHOOK_URL_MAX);
		return -EINVAL;
	}
	if (!printable_ascii(url)) {
		snprintf(why, whylen, "must be printable ASCII without spaces");
		return -EINVAL;
	}
	if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
		snprintf(why, whylen, "must start with http:// or https://");
		return -EINVAL;
	}
	int rc = parse(url, host, hostlen, why, whylen);
	if (rc < 0)
		return rc;
	*literal = inet_pton(AF_INET, host, bin) == 1 || inet_pton(AF_INET6, host, bin) == 1;
	return 0;
}

/* The v4 address a NAT64 address (64:ff9b::/96, RFC 6052) embeds, as text. */
static bool nat64_v4(const char *address, char *out, size_t len)
{
	static const unsigned char prefix[12] = {0x00, 0x64, 0xff, 0x9b};
	unsigned char bin[16];

	if (inet_pton(AF_INET6, address, bin) != 1 || memcmp(bin, prefix, 12))
		return false;
	return inet_ntop(AF_INET, bin + 12, out, (socklen_t)len) != NULL;
}

bool notify_address_listed(const char *address, const char *list)
{
	char item[128], v4[INET_ADDRSTRLEN];
	const char *p = list ? list : "";
	struct cidr c;

	while (*p) {
		size_t n = strcspn(p, ", \t");
		if (n && n < sizeof(item)) {
			memcpy(item, p, n);
			item[n] = '\0';
			if (cidr_parse(item, &c) == 0 &&
			    (cidr_contains(&c, address) ||
			     (nat64_v4(address, v4, sizeof(v4)) && cidr_contains(&c, v4))))
				return true;
		}
		p += n;
		p += strspn(p, ", \t");
	}
	return false;
}

/* Whether address is one of the host's own now (any interface, up or not). */
static bool host_address(const char *address)
{
	struct ifaddrs *ifs, *i;
	char text[INET6_ADDRSTRLEN];
	bool found = false;
	struct cidr c;

	if (getifaddrs(&ifs) < 0)
		return true; /* cannot tell: refuse rather than guess */
	for (i = ifs; i && !found; i = i->ifa_next) {
		const struct sockaddr *sa = i->ifa_addr;
		const void *bin;
		if (!sa || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
			continue;
		bin = sa->sa_family == AF_INET ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
					       : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (inet_ntop(sa->sa_family, bin, text, sizeof(text)) && cidr_parse(text, &c) == 0 &&
		    cidr_contains(&c, address))
			found = true;
	}
	freeifaddrs(ifs);
	return found;
}

bool notify_text_allowed(const char *address, const char *deny, char *why, size_t whylen)
{
	if (notify_address_listed(address, egress_always_denied)) {
		snprintf(why, whylen, "%s is in a range no egress may reach (loopback, link-local, ...)",
			 address);
		return false;
	}
	if (notify_address_listed(address, deny)) {
		snprintf(why, whylen, "%s is in [network] deny", address);
		return false;
	}
	if (host_address(address)) {
		snprintf(why, whylen, "%s is an address of the host", address);
		return false;
	}
	return true;
}

bool notify_address_allowed(const struct sockaddr *sa, const char *deny, char *why,
			    size_t whylen)
{
	char text[INET6_ADDRSTRLEN];
	const void *bin;

	if (sa->sa_family == AF_INET)
		bin = &((const struct sockaddr_in *)sa)->sin_addr;
	else if (sa->sa_family == AF_INET6)
		bin = &((const struct sockaddr_in6 *)sa)->sin6_addr;
	else
		bin = NULL;
	if (!bin || !inet_ntop(sa->sa_family, bin, text, sizeof(text))) {
		snprintf(why, whylen, "not an IPv4 or IPv6 address");
		return false;
	}
	return notify_text_allowed(text, deny, why, whylen);
}
