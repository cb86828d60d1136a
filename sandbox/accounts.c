/* accounts.c - the text of the sandbox's /etc/passwd and /etc/group; see accounts.h.
 *
 * Inside, the host's account files would name whoever owns uid 1000 on the host (the
 * first admin, often) and list every host account.  Container runtimes write their
 * own; so do we: root (unmapped inside, so nothing ever runs as it), the user with
 * the HOME the sandbox sets, and nobody/nogroup, which unmapped ids show as. */
#include "labd/sandbox.h"
#include "sandbox/accounts.h"

#include <stdio.h>
#include <string.h>

#define NOBODY_ID 65534u

static bool field_ok(const char *s)
{
	return s && s[0] && !strpbrk(s, ":\n\r");
}

int accounts_text(const char *user, uint32_t uid, const char *home, char *passwd, size_t plen,
		  char *group, size_t glen)
{
	int n, m;

	if (!field_ok(user) || !field_ok(home) || home[0] != '/' || uid == 0 || uid >= NOBODY_ID)
		return -1;
	n = snprintf(passwd, plen,
		     "root:x:0:0:root:/root:/usr/sbin/nologin\n"
		     "%s:x:%u:%u:%s:%s:/bin/sh\n"
		     "nobody:x:%u:%u:nobody:/nonexistent:/usr/sbin/nologin\n",
		     user, (unsigned)uid, (unsigned)uid, user, home, NOBODY_ID, NOBODY_ID);
	m = snprintf(group, glen, "root:x:0:\n%s:x:%u:\nnogroup:x:%u:\n", user, (unsigned)uid,
		     NOBODY_ID);
	if (n < 0 || (size_t)n >= plen || m < 0 || (size_t)m >= glen)
		return -1;
	return 0;
}
