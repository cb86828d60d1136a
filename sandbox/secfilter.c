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
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

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

/* The address families a notebook needs: Unix sockets (Jupyter's own socket, ZMQ
 * ipc), IPv4 and IPv6 (kernels on the sandbox's loopback, pip), and netlink for route
 * queries only (getaddrinfo's AI_ADDRCONFIG, ip addr).  Everything else (AF_PACKET,
 * AF_KEY, AF_ALG, AF_VSOCK, AF_BLUETOOTH, AF_XDP, ...) is kernel attack surface no
 * notebook needs: refused with EPERM, which a kernel lacking the family never says. */
static int add_socket_rules(scmp_filter_ctx ctx, int nr)
{
	int rc;

	/* a family above AF_NETLINK, or with any of the upper 32 bits set (the kernel
	 * reads an int; the filter sees 64 bits), is out */
	rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1, SCMP_A0(SCMP_CMP_GT, AF_NETLINK, 0));
	for (int fam = 0; rc >= 0 && fam < AF_NETLINK; fam++)
		if (fam != AF_UNIX && fam != AF_INET && fam != AF_INET6)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1,
					      SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fam, 0));
	if (rc >= 0) /* netlink: route only (no audit, no netfilter, no uevents) */
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 2,
				      SCMP_A0(SCMP_CMP_EQ, AF_NETLINK, 0),
				      SCMP_A2(SCMP_CMP_NE, NETLINK_ROUTE, 0));
	return rc;
}

/* Terminal ioctls: TIOCSTI/TIOCLINUX push input into the terminal (CVE-2017-5226),
 * TIOCSETD loads a line discipline module and reaches old, buggy ldisc code (the
 * n_gsm/n_hdlc CVEs).  Compare the low 32 bits only, as the kernel does
 * (CVE-2019-10063). */
static int add_ioctl_rules(scmp_filter_ctx ctx)
{
	static const unsigned long cmds[] = {TIOCSTI, TIOCLINUX, TIOCSETD};
	int rc = 0;

	for (size_t i = 0; rc >= 0 && i < sizeof(cmds) / sizeof(cmds[0]); i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, cmds[i]));
	return rc;
}

/* personality(2) with anything but PER_LINUX (0), PER_LINUX32 (8) or the query
 * 0xffffffff fails with EPERM: READ_IMPLIES_EXEC makes every readable mapping
 * executable, ADDR_NO_RANDOMIZE switches ASLR off for what the process execs next,
 * MMAP_PAGE_ZERO maps page 0 (Docker allows the same few values).  libseccomp cannot
 * say "none of three values" (one comparison per argument), so this is a small
 * filter of its own, stacked on the main one; the kernel applies the strictest
 * answer of all filters.  The kernel reads an unsigned int: the low 32 bits are
 * compared, and any upper bit set is refused as well. */
static int install_personality_filter(void)
{
	enum { LO = offsetof(struct seccomp_data, args[0]), HI = LO + 4 };
	struct sock_filter prog[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_personality, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, HI), /* little-endian: the upper half */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 5),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, LO),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PER_LINUX, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PER_LINUX32, 1, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xffffffffu, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	};
	struct sock_fprog fp = {.len = sizeof(prog) / sizeof(prog[0]), .filter = prog};

	_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "args[0] halves assume little-endian");
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp, 0, 0);
}

/* The deny list in a libseccomp context (the caller releases it); NULL, errno set. */
static scmp_filter_ctx build(void)
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
		return NULL;
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
	if ((rc = add_ioctl_rules(ctx)) < 0 || (rc = add_socket_rules(ctx, SCMP_SYS(socket))) < 0 ||
	    (rc = add_socket_rules(ctx, SCMP_SYS(socketpair))) < 0)
		goto out;
	return ctx;
out:
	seccomp_release(ctx);
	errno = -rc;
	return NULL;
}

int secfilter_install(void)
{
	scmp_filter_ctx ctx = build();
	int rc;

	if (!ctx)
		return -1;
	rc = seccomp_load(ctx);
	seccomp_release(ctx);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	return install_personality_filter() < 0 ? -1 : 0;
}

int secfilter_export(int fd)
{
	scmp_filter_ctx ctx = build();
	int rc;

	if (!ctx)
		return -1;
	rc = seccomp_export_bpf(ctx, fd);
	seccomp_release(ctx);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	return 0;
}

int secfilter_load(const void *prog, size_t len)
{
	struct sock_fprog fp = {.len = (unsigned short)(len / sizeof(struct sock_filter)),
				.filter = (struct sock_filter *)prog};

	if (!len || len % sizeof(struct sock_filter) || len / sizeof(struct sock_filter) > BPF_MAXINSNS) {
		errno = EINVAL;
		return -1;
	}
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp, 0, 0) < 0)
		return -1;
	return install_personality_filter() < 0 ? -1 : 0;
}
