/* tool.h - a host tool (ip, nft) run by root for a sandbox's network: its input fed
 * on stdin, what it prints kept for the failure message. Internal to sandbox/
 * (netveth.c, netpeer.c, egress.c, which also starts pasta with tool_close_from). */
#ifndef LABD_SANDBOX_TOOL_H
#define LABD_SANDBOX_TOOL_H

#include <stdbool.h>

struct tool_run {
	char *const *argv; /* argv[0] the tool's path */
	const char *input; /* its stdin; NULL or "": none */
	int nsfd;          /* >= 0: the child joins this network namespace first */
	int fd3;           /* >= 0: given to the tool as its fd 3 ("/proc/self/fd/3") */
	/* called in the child once it joined nsfd, its stdout and stderr being the pipe
	 * back (what it prints goes into the message); < 0 ends the child (status 125) */
	int (*prepare)(void *arg);
	void *arg;
	bool quiet; /* a failure returns -1 without a failure message (fail.h) */
};

/* Runs t's tool and waits for it. 0 when it exited 0, else -1 (with a failure
 * message naming the tool, its first argument, its exit status and what it
 * printed, unless quiet). */
int tool_run(const struct tool_run *t);
/* Closes every descriptor from first on (in a child before its exec). */
void tool_close_from(int first);
/* iproute2's ip where Debian and others put it (the first path when none is there:
 * the run then fails naming it). */
const char *tool_ip_path(void);

#endif
