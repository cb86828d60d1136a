/* secfilter.h - the sandbox's seccomp-bpf deny list (libseccomp).
 * The list and the reason per syscall are in docs/sandbox.md; keep both in step. */
#ifndef LABD_SECFILTER_H
#define LABD_SECFILTER_H

#include <stddef.h>

/* Installs the filter in the calling thread (no_new_privs must already be set, or the
 * caller holds CAP_SYS_ADMIN).  Native architecture only: other ABIs (i386 int 0x80,
 * x32) kill the process.  0 or -1 (errno set). */
int secfilter_install(void);
/* The denied syscall names (NULL-terminated, static), for docs and tests. */
const char *const *secfilter_denied(void);

#endif
