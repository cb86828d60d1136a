/* str.c - see str.h. */
#include "labd/str.h"

#include <errno.h>
#include <string.h>

int str_copy(char *dst, size_t dstlen, const char *src)
{
	size_t len = strnlen(src, dstlen);

	if (dstlen == 0)
		return -ENAMETOOLONG;
	if (len == dstlen) {
		memcpy(dst, src, dstlen - 1);
		dst[dstlen - 1] = '\0';
		return -ENAMETOOLONG;
	}
	memcpy(dst, src, len + 1);
	return (int)len;
}

size_t str_utf8_len(const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);

	if (n <= max)
		return n;
	n = max;
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return n;
}
