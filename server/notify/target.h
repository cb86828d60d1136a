/* target.h - where a webhook may send: its URL's shape and the addresses a
 * delivery may connect to (docs/security.md §8, "Webhooks").
 *
 * A delivery goes where the user's own egress could go and nowhere else:
 * the always-denied ranges of a runtime's egress (loopback, "this network",
 * link-local with the metadata services, multicast, the v6 forms that carry
 * a v4 address), [network] deny and every address of the host. The check is
 * made on the address a socket is about to connect to, after resolution, so
 * a name that resolves (or re-resolves) to a denied address is refused. */
#ifndef LABD_NOTIFY_TARGET_H
#define LABD_NOTIFY_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#define NOTIFY_URL_MIN 10 /* "http://a.b" */

/* Pure but for the parser: whether url is an absolute http or https URL of
 * at most WEBHOOK_URL_MAX bytes with a host, no user or password, no
 * fragment, printable ASCII only. 0, or -EINVAL with why set. When the host
 * is an address literal, *literal is set and its text copied to host. */
int notify_url_check(const char *url, char *host, size_t hostlen, bool *literal, char *why,
		     size_t whylen);
/* Pure: whether the address (text) lies in one of the comma- or
 * blank-separated CIDRs of list; an address in the NAT64 prefix
 * 64:ff9b::/96 is also checked as the v4 address it embeds. */
bool notify_address_listed(const char *address, const char *list);
/* Whether a delivery may connect to sa: false with why set when it lies in
 * an always-denied range, in deny ([network] deny) or is an address of the
 * host now (getifaddrs). */
bool notify_address_allowed(const struct sockaddr *sa, const char *deny, char *why,
			    size_t whylen);
/* The same for an address given as text (an URL's literal). */
bool notify_text_allowed(const char *address, const char *deny, char *why, size_t whylen);

#endif
