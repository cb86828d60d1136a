/* forwarded.c - X-Forwarded-For behind trusted proxies; see forwarded.h. */
#include "http/forwarded.h"

#include <string.h>

#include "labd/str.h"

#define XFF_MAX_BYTES 2048 /* longer lists are not walked: the peer is used */

int forwarded_trusted(const struct labd_config *cfg, const char *address)
{
	for (unsigned i = 0; i < cfg->n_trusted_proxies; i++)
		if (cidr_contains(&cfg->trusted_proxies[i], address))
			return 1;
	return 0;
}

/* Copies the entry ending before end (trimmed of spaces) into out; 0, or -1
 * when it does not parse as an address. */
static int entry(const char *start, const char *end, char *out, size_t outlen)
{
	struct cidr probe;

	while (start < end && (*start == ' ' || *start == '\t'))
		start++;
	while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if (end == start || (size_t)(end - start) >= outlen || memchr(start, '/', end - start))
		return -1;
	memcpy(out, start, (size_t)(end - start));
	out[end - start] = '\0';
	return cidr_parse(out, &probe) < 0 ? -1 : 0;
}

int forwarded_client(const struct labd_config *cfg, const char *peer, const char *xff, char *out,
		     size_t outlen)
{
	char hop[64];
	const char *end;

	str_copy(out, outlen, peer);
	if (!xff || !xff[0] || !forwarded_trusted(cfg, peer) || strlen(xff) > XFF_MAX_BYTES)
		return 0;
	end = xff + strlen(xff);
	while (end > xff) {
		const char *start = end;
		while (start > xff && start[-1] != ',')
			start--;
		if (entry(start, end, hop, sizeof(hop)) < 0) {
			str_copy(out, outlen, peer);
			return 0;
		}
		str_copy(out, outlen, hop);
		if (!forwarded_trusted(cfg, hop))
			return 1;
		end = start > xff ? start - 1 : xff;
	}
	return 1;
}
