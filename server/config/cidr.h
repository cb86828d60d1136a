/* cidr.h - IPv4/IPv6 addresses and networks ("10.0.0.0/8", "::1") for
 * [server] trusted_proxies: parsed once at start, matched per request. */
#ifndef LABD_CIDR_H
#define LABD_CIDR_H

#include <stdbool.h>

struct cidr {
	int family;              /* AF_INET or AF_INET6 */
	unsigned char addr[16];  /* network byte order; 4 bytes used for IPv4 */
	unsigned prefix_bits;    /* 0..32 or 0..128 */
};

/* Parses "ADDRESS" or "ADDRESS/BITS" into *out (host bits cleared); -EINVAL
 * when malformed or BITS is out of range. */
int cidr_parse(const char *text, struct cidr *out);
/* True when the textual address lies in c. An IPv4-mapped IPv6 address
 * ("::ffff:127.0.0.1") matches as the IPv4 address it carries. */
bool cidr_contains(const struct cidr *c, const char *address);

#endif
