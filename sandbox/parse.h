/* parse.h - pure parsers for the sandbox-only options given as text (labbox).
 * Sizes, CPU counts, numbers and user names are parsed by labd/parse.h, shared
 * with the server. Every function returns 0 on success or -1 (no logging; the
 * caller says what). */
#ifndef LABD_SANDBOX_PARSE_H
#define LABD_SANDBOX_PARSE_H

#include "labd/sandbox.h"

/* "0", "1,3" -> GPU minors (each < 256, no duplicates) into spec->gpus. */
int sandbox_parse_gpus(const char *s, struct sandbox_spec *spec);
/* "none" or "egress". */
int sandbox_parse_net(const char *s, enum sandbox_net *out);
/* Field `field` (as proc(5) numbers them, >= 3) of a /proc/<pid>/stat line, as an
 * unsigned decimal number; comm (field 2) may hold spaces and ')'. */
int sandbox_parse_stat_field(const char *stat, unsigned field, uint64_t *out);

#endif
