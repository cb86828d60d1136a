/* secfilter.c - the sandbox's seccomp deny list; see secfilter.h and the table with
 * a reason per syscall in docs/sandbox.md (modelled on Docker's default profile).
 *
 * Default action ALLOW, listed syscalls fail with EPERM (not a kill: programs probe for
 * features and must see a clean error).  Native architecture only, so i386 (int 0x80)
 * and x32 calls hit the bad-arch action and kill the process, which also closes the
 * i386 socketcall() way around the socket() rules.
 */
#include "sandbox/secfilter.h"

#include <errno.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

static const char *const denied[] = {
	/* filesystem namespace: mounts stay with the supervisor */
	"mount", "umount", "umount2", "pivot_root", "chroot",
	"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
	/* no nested namespaces (gateway to CVE-2022-0492, CVE-2022-0185, netfilter bugs) */
	"unshare", "setns",
	/* the host kernel itself */
	"kexec_load", "kexec_file_load", "reboot",
	"init_module", "finit_module", "delete_module", "create_module", "query_module",
	"get_kernel_syms",
	"bpf", "perf_event_open", "userfaultfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	/* the keyring is not namespaced */
	"keyctl", "add_key", "request_key",
	/* shocker: file handles reach outside the mount */
	"open_by_handle_at",
	/* host-global resources */
	"swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
	"settimeofday", "stime", "clock_settime",
	"syslog", "iopl", "ioperm", "vm86", "vm86old",
	/* obsolete or unimplemented */
	"lookup_dcookie", "nfsservctl", "uselib", "ustat", "sysfs", "_sysctl", "afs_syscall",
	"tuxcall", "security", "vserver", "getpmsg", "putpmsg",
	/* other processes' memory and NUMA placement; host-wide monitoring; tty hangup */
	"kcmp", "process_madvise", "migrate_pages", "move_pages", "set_mempolicy_home_node",
	"fanotify_init", "vhangup",
	NULL,
};

const char *const *secfilter_denied(void) { return denied; }

int secfilter_install(void)
{
	/* every namespace flag clone(2) accepts */
	static const unsigned long ns_flags[] = {CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS,
						  CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
						  CLONE_NEWNET};
	scmp_filter_ctx ctx;
	int rc = -EINVAL;

	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx) {
		errno = ENOMEM;
		return -1;
	}
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0)
		goto out;
	for (const char *const *n = denied; *n; n++) {
		int nr = seccomp_syscall_resolve_name(*n);
		if (nr == __NR_SCMP_ERROR)
			continue; /* unknown to this libseccomp: nothing to deny */
		if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0)) < 0)
			goto out;
	}
	for (size_t i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++) {
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				      SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
		if (rc < 0)
			goto out;
	}
	/* clone3 passes flags in a struct seccomp cannot read: ENOSYS makes glibc fall
	 * back to clone(2), whose flags the rules above check */
	if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)) < 0)
		goto out;
	/* TIOCSTI/TIOCLINUX push input into the terminal (CVE-2017-5226); compare the low
	 * 32 bits only, as the kernel does (CVE-2019-10063) */
	rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
			      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
	if (rc < 0)
		goto out;
	rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
			      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX));
	if (rc < 0)
		goto out;
	/* AF_ALG: kernel crypto attack surface; AF_VSOCK reaches the hypervisor's agents */
	rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
			      SCMP_A0(SCMP_CMP_EQ, AF_ALG, 0));
	if (rc < 0)
		goto out;
	rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
			      SCMP_A0(SCMP_CMP_EQ, AF_VSOCK, 0));
	if (rc < 0)
		goto out;
	rc = seccomp_load(ctx);
out:
	seccomp_release(ctx);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	return 0;
}
