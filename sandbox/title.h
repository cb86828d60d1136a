/* title.h - how a sandbox's init shows on the host: `ps` tells it from the daemon.
 *
 * comm (/proc/<pid>/comm, 15 bytes) becomes "lsbx-<user>" and the command line
 * (/proc/<pid>/cmdline) "labd-sandbox <user>". */
#ifndef LABD_SANDBOX_TITLE_H
#define LABD_SANDBOX_TITLE_H

#include <stddef.h>
#include <stdint.h>

/* Where the kernel reads this process's command line (proc(5) stat fields 48-51). */
struct title_area {
	uint64_t arg_start, arg_end, env_start, env_end;
};

/* Parses the area from a /proc/<pid>/stat line; 0 or -1.  Pure. */
int title_area_parse(const char *stat, struct title_area *area);
/* How many bytes of title (NUL included) the area holds: the argument strings, and the
 * environment strings too when they follow them directly (the kernel reads on into
 * them when the argument area's last byte is not a NUL).  Pure. */
size_t title_room(const struct title_area *area);
/* Sets comm and overwrites this process's own copy of its argument (and, if needed,
 * environment) strings.  Call in init only, once nothing it still needs points there.
 * 0, or -1 with a message in msg. */
int title_set(const char *user, char *msg, size_t msg_size);

#endif
