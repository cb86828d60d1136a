/* unit.h - shared helpers for the cmocka unit tests (header-only). */
#ifndef LABD_UNIT_H
#define LABD_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* Makes a fresh temporary directory; the path is written into dir[64]. */
static inline void unit_tempdir(char dir[64])
{
	snprintf(dir, 64, "/tmp/labd-unit-XXXXXX");
	assert_non_null(mkdtemp(dir));
}

/* Removes a temporary directory and everything in it. */
static inline void unit_rmdir(const char *dir)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* Writes text to dir/name and puts the path into out[128]. */
static inline void unit_write(const char *dir, const char *name, const char *text, char out[128])
{
	snprintf(out, 128, "%s/%s", dir, name);
	FILE *f = fopen(out, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

#endif
