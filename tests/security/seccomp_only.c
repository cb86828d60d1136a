/* seccomp_only.c - a positive control for the escape suite: runs a command under
 * labd's seccomp filter (sandbox/seccomp.c) and nothing else: no namespace, no uid
 * change, every capability kept.  Run as host root, a probe that gets EPERM here but
 * succeeds without this wrapper shows that the filter, not a missing capability, is
 * what refuses the call.  Built by tests/security/run.sh (the Makefile builds only
 * the probe, which must stay libc-only).
 *
 *   seccomp_only CMD [ARGS...] */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "sandbox/secfilter.h"

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs("usage: seccomp_only CMD [ARGS...]\n", stderr);
		return 2;
	}
	/* seccomp(2) without CAP_SYS_ADMIN needs no_new_privs; the sandbox sets it too */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || secfilter_install() < 0) {
		fprintf(stderr, "seccomp_only: installing the filter: %s\n", strerror(errno));
		return 125;
	}
	execv(argv[1], argv + 1);
	fprintf(stderr, "seccomp_only: exec %s: %s\n", argv[1], strerror(errno));
	return 127;
}
