/* parse.h - pure parsers for sandbox limits given as text (CLI, config) and /proc.
 * Every function returns 0 on success or -1 (no logging; the caller says what). */
#ifndef LABD_SANDBOX_PARSE_H
#define LABD_SANDBOX_PARSE_H

#include <stdint.h>

#include "labd/sandbox.h"

/* "4096", "512K", "4M", "15G", "1T" (binary units, optional "iB"/"B"); no overflow. */
int sandbox_parse_size(const char *s, uint64_t *out);
/* "2", "0.5", "1.25" CPUs -> thousandths (2000, 500, 1250); 1..1024 CPUs. */
int sandbox_parse_cpus(const char *s, uint32_t *milli);
/* Decimal 1..max with no sign, spaces or trailing text. */
int sandbox_parse_uint(const char *s, uint64_t max, uint64_t *out);
/* "0", "1,3" -> GPU minors (each < 256, no duplicates) into spec->gpus. */
int sandbox_parse_gpus(const char *s, struct sandbox_spec *spec);
/* "none" or "egress". */
int sandbox_parse_net(const char *s, enum sandbox_net *out);
/* Field `field` (as proc(5) numbers them, >= 3) of a /proc/<pid>/stat line, as an
 * unsigned decimal number; comm (field 2) may hold spaces and ')'. */
int sandbox_parse_stat_field(const char *stat, unsigned field, uint64_t *out);
/* A lab user name: 1..32 chars of [a-z_][a-z0-9_-]*. 1 if valid, else 0. */
int sandbox_user_name_ok(const char *s);

#endif
