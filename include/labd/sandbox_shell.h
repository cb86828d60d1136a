/* sandbox_shell.h - a terminal in a running sandbox, beside what runs there
 * (docs/sandbox.md, "A shell in a running sandbox"; docs/jobs.md "A shell into a
 * running job").
 *
 * The shell joins the sandbox exactly as its command runs: its cgroups (limits and
 * teardown), every namespace of its init (user, mount, pid, network, IPC, UTS,
 * cgroup), the inner uid and gid with no supplementary group and no capability,
 * no_new_privs and the same seccomp filter (secfilter.h).  Its terminal is a pty of
 * the sandbox's own devpts instance; the caller gets the master. */
#ifndef LABD_SANDBOX_SHELL_H
#define LABD_SANDBOX_SHELL_H

#include <stdint.h>

#include "labd/sandbox.h"

struct sandbox_shell {
	uint32_t inner_uid; /* the sandbox's user inside (its spec's inner_uid) */
	uint64_t nofile;    /* RLIMIT_NOFILE, as the sandbox's (0: 4096) */
	char *const *argv;  /* looked up in the sandbox's PATH; argv2 tried when it is missing */
	char *const *argv2; /* may be NULL */
	char *const *envp;  /* the whole environment ("K=V", NULL-terminated) */
	const char *cwd;    /* inside; "/" when it cannot be entered */
	unsigned short cols, rows; /* the terminal's first size (0: 80x24) */
};

/* Starts the shell in the running sandbox h and puts the pty's master (O_CLOEXEC,
 * blocking) in *master_fd and a pidfd of the shell (its caller kills it with
 * pidfd_send_signal when what it was opened for ends) in *pidfd.  Changes the calling process's namespaces and cgroups for
 * good: call it only in a forked, single-threaded child of root that exits after
 * (a supervisor worker).  The shell is not the caller's child once that exits: the
 * sandbox's init reaps it, and it ends with the sandbox (or when the master is closed:
 * the terminal hangs up).  0, or -1 with *err (step "shell", may be NULL) saying why. */
int sandbox_shell_start(const struct sandbox_handle *h, const struct sandbox_shell *s,
			int *master_fd, int *pidfd, struct sandbox_error *err);

#endif
