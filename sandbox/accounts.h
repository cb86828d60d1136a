/* accounts.h - the sandbox's own /etc/passwd and /etc/group (docs/sandbox.md,
 * "Accounts"): root, the lab user under their labd name and nobody, and nothing of
 * the host's accounts.  Internal to sandbox/; the child binds them (mounts.c). */
#ifndef LABD_SANDBOX_ACCOUNTS_H
#define LABD_SANDBOX_ACCOUNTS_H

#include <stddef.h>
#include <stdint.h>

#include "labd/sandbox.h"

/* Where inside the files are made (in the /run tmpfs) before they are bound over
 * /etc/passwd and /etc/group. */
#define ACCOUNTS_DIR "/run/labd-accounts"
/* Large enough for any name and home the spec check lets through. */
#define ACCOUNTS_TEXT_MAX (SANDBOX_PATH_MAX + 512)

/* Fills passwd and group with the three entries for user (uid and gid uid, home
 * home).  A field holding ':' or a line break would add or split an entry, so such a
 * user or home is refused (as is an empty user, a uid of 0 or 65534, or text that
 * does not fit).  0 or -1.  Pure. */
int accounts_text(const char *user, uint32_t uid, const char *home, char *passwd, size_t plen,
		  char *group, size_t glen);

#endif
