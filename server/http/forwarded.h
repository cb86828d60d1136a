/* forwarded.h - the client behind a trusted front proxy, from X-Forwarded-For.
 * Pure: no I/O, so the unit tests and any fuzzing drive it directly. */
#ifndef LABD_FORWARDED_H
#define LABD_FORWARDED_H

#include <stddef.h>

#include "config/config.h"

/* Writes the client address for a request from peer into out:
 *  - peer itself unless peer is in cfg->trusted_proxies (then X-Forwarded-For
 *    is only something the client said, and is ignored);
 *  - else the right-most entry of xff (NULL: absent) that is not a trusted
 *    proxy, walking from the right as each trusted hop appended the address it
 *    saw (nginx's real_ip_recursive); the left-most entry when every one is
 *    trusted; peer again when an entry met on the way is not an address.
 * Returns 1 when the address came from X-Forwarded-For, else 0. */
int forwarded_client(const struct labd_config *cfg, const char *peer, const char *xff, char *out,
		     size_t outlen);
/* True when address is one of cfg->trusted_proxies. */
int forwarded_trusted(const struct labd_config *cfg, const char *address);

#endif
