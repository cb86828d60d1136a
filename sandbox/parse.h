/* parse.h - pure parsers for the sandbox-only options given as text (labbox).
 * Sizes, CPU counts, numbers and user names are parsed by labd/parse.h, shared
 * with the server. Every function returns 0 on success or -1 (no logging; the
 * caller says what). */
#ifndef LABD_SANDBOX_PARSE_H
#define LABD_SANDBOX_PARSE_H

#include "labd/sandbox.h"

/* "0", "1,3", "0/gi1/ci0,1/share2" -> GPU device ids (labd/gpudev.h: the text forms)
 * into spec->gpus; none named twice nor with its card. */
int sandbox_parse_gpus(const char *s, struct sandbox_spec *spec);
/* "MIG-…,GPU-…" -> spec->gpu_uuids, split in s (which they point into). */
int sandbox_parse_gpu_uuids(char *s, struct sandbox_spec *spec);
/* "none" or "egress". */
int sandbox_parse_net(const char *s, enum sandbox_net *out);
/* Field `field` (as proc(5) numbers them, >= 3) of a /proc/<pid>/stat line, as an
 * unsigned decimal number; comm (field 2) may hold spaces and ')'. */
int sandbox_parse_stat_field(const char *stat, unsigned field, uint64_t *out);

#endif
