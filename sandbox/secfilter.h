/* secfilter.h - the sandbox's seccomp-bpf deny list (libseccomp).
 * The list and the reason per syscall are in docs/sandbox.md; keep both in step. */
#ifndef LABD_SECFILTER_H
#define LABD_SECFILTER_H

#include <stddef.h>

/* Installs the filter in the calling thread (no_new_privs must already be set, or the
 * caller holds CAP_SYS_ADMIN).  Native architecture only: other ABIs (i386 int 0x80,
 * x32) kill the process.  0 or -1 (errno set). */
int secfilter_install(void);
/* The same in two parts, so that the costly one (libseccomp's building of the program,
 * 0.3-0.4 ms) runs in the parent of a sandbox while the child builds its file system:
 * secfilter_export writes the program (an array of struct sock_filter) to fd;
 * secfilter_load installs such a program of len bytes, then the personality filter.
 * 0 or -1 (errno set). */
int secfilter_export(int fd);
int secfilter_load(const void *prog, size_t len);
/* The denied syscall names (NULL-terminated, static), for docs and tests. */
const char *const *secfilter_denied(void);

#endif
