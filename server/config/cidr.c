/* cidr.c - address/prefix parsing and matching; see cidr.h. */
#include "config/cidr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "labd/parse.h"

/* Text to raw bytes: 4 for IPv4, 16 for IPv6 (mapped IPv4 folded to 4). */
static int address_bytes(const char *text, int *family, unsigned char out[16])
{
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	if (inet_pton(AF_INET, text, out) == 1) {
		*family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, text, out) != 1)
		return -EINVAL;
	*family = AF_INET6;
	if (memcmp(out, mapped, sizeof(mapped)) == 0) {
		memmove(out, out + 12, 4);
		*family = AF_INET;
	}
	return 0;
}

static void clear_host_bits(unsigned char *addr, unsigned len_bytes, unsigned prefix_bits)
{
	for (unsigned i = 0; i < len_bytes; i++) {
		unsigned keep = prefix_bits > i * 8 ? prefix_bits - i * 8 : 0;
		addr[i] &= keep >= 8 ? 0xff : (unsigned char)(0xff << (8 - keep));
	}
}

int cidr_parse(const char *text, struct cidr *out)
{
	char addr[64];
	const char *slash = strchr(text, '/');
	size_t len = slash ? (size_t)(slash - text) : strlen(text);
	uint64_t bits;

	if (len == 0 || len >= sizeof(addr))
		return -EINVAL;
	memcpy(addr, text, len);
	addr[len] = '\0';
	memset(out, 0, sizeof(*out));
	if (address_bytes(addr, &out->family, out->addr) < 0)
		return -EINVAL;
	unsigned max_bits = out->family == AF_INET ? 32 : 128;
	if (!slash)
		bits = max_bits;
	else if (parse_uint(slash + 1, 0, max_bits, &bits) < 0)
		return -EINVAL;
	out->prefix_bits = (unsigned)bits;
	clear_host_bits(out->addr, max_bits / 8, out->prefix_bits);
	return 0;
}

bool cidr_contains(const struct cidr *c, const char *address)
{
	unsigned char a[16];
	int family;

	if (address_bytes(address, &family, a) < 0 || family != c->family)
		return false;
	clear_host_bits(a, family == AF_INET ? 4 : 16, c->prefix_bits);
	return memcmp(a, c->addr, family == AF_INET ? 4 : 16) == 0;
}
