/* resolve.h - openat2(2), which glibc 2.36 does not wrap: every path the supervisor
 * opens on a user's behalf is resolved with RESOLVE_* flags (no symlink leaves the
 * place it was asked to stay in).  Internal to sandbox/. */
#ifndef LABD_SANDBOX_RESOLVE_H
#define LABD_SANDBOX_RESOLVE_H

#include <linux/openat2.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline int resolve_open(int dirfd, const char *path, uint64_t flags, uint64_t resolve)
{
	struct open_how how = {.flags = flags, .mode = 0, .resolve = resolve};
	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

#endif
