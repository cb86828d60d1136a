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
