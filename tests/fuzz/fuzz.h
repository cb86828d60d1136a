/* fuzz.h - helpers shared by the libFuzzer harnesses of tests/fuzz/.
 *
 * Each harness feeds libFuzzer's bytes to one parser of untrusted bytes and
 * checks what the parser promises (bounds, round trips, the same answer
 * however the bytes are split); a broken promise aborts, which libFuzzer
 * reports as a crash with the input that caused it. */
#ifndef LABD_TESTS_FUZZ_H
#define LABD_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts (a finding) when cond is false, naming it. */
#define FUZZ_ASSERT(cond)                                                              \
	do {                                                                            \
		if (!(cond)) {                                                          \
			fprintf(stderr, "%s:%d: broken promise: %s\n", __FILE__, __LINE__, \
				#cond);                                                 \
			abort();                                                        \
		}                                                                       \
	} while (0)

/* A NUL-terminated copy of n bytes (the text may hold NULs before the end). */
static inline char *fuzz_cstr(const uint8_t *data, size_t n)
{
	char *s = malloc(n + 1);
	if (!s)
		abort();
	memcpy(s, data, n);
	s[n] = '\0';
	return s;
}

/* Cuts the next '\n'-ended piece off *data (the rest when there is none) as
 * a NUL-terminated copy; the harnesses that take several strings split
 * their input so. */
static inline char *fuzz_take_line(const uint8_t **data, size_t *size)
{
	const uint8_t *nl = memchr(*data, '\n', *size);
	size_t n = nl ? (size_t)(nl - *data) : *size;
	char *s = fuzz_cstr(*data, n);

	*data += nl ? n + 1 : n;
	*size -= nl ? n + 1 : n;
	return s;
}

#endif
