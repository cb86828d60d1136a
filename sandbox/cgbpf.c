/* cgbpf.c - cgroup v2 device allow-list as a BPF program; see cgbpf.h.
 *
 * The kernel calls the program with struct bpf_cgroup_dev_ctx { access_type, major,
 * minor }, access_type = (access << 16) | type; returning 0 makes open()/mknod() fail
 * with EPERM (Documentation/admin-guide/cgroup-v2.rst, "Device controller").  The
 * prologue that splits access_type follows systemd and crun (src/libcrun/ebpf.c).
 */
#include "sandbox/cgbpf.h"

#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/fail.h"

#define INSN(c, d, s, o, i) ((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})
#define LDX_W(dst, src, off) INSN(BPF_LDX | BPF_MEM | BPF_W, dst, src, off, 0)
#define ALU32_IMM(op, dst, imm) INSN(BPF_ALU | (op) | BPF_K, dst, 0, 0, imm)
#define MOV32_REG(dst, src) INSN(BPF_ALU | BPF_MOV | BPF_X, dst, src, 0, 0)
#define MOV64_IMM(dst, imm) INSN(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm)
#define JNE_IMM(dst, imm, off) INSN(BPF_JMP | BPF_JNE | BPF_K, dst, 0, off, imm)
#define EXIT() INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

int cgbpf_dev_build(const struct cgbox_dev *devs, size_t n, struct bpf_insn *out, size_t max)
{
	size_t k = 0;

	if (max < 8 || n > (max - 8) / 8)
		return -1;
	out[k++] = LDX_W(BPF_REG_2, BPF_REG_1, 0); /* r2 = type */
	out[k++] = ALU32_IMM(BPF_AND, BPF_REG_2, 0xFFFF);
	out[k++] = LDX_W(BPF_REG_3, BPF_REG_1, 0); /* r3 = access */
	out[k++] = ALU32_IMM(BPF_RSH, BPF_REG_3, 16);
	out[k++] = LDX_W(BPF_REG_4, BPF_REG_1, 4); /* r4 = major */
	out[k++] = LDX_W(BPF_REG_5, BPF_REG_1, 8); /* r5 = minor */
	for (size_t i = 0; i < n; i++) {
		int type = devs[i].type == 'b' ? BPF_DEVCG_DEV_BLOCK : BPF_DEVCG_DEV_CHAR;
		bool any_minor = devs[i].minor == ~0u;
		/* each block is 8 insns; a miss jumps to the start of the next block */
		out[k++] = JNE_IMM(BPF_REG_2, type, 7);
		out[k++] = JNE_IMM(BPF_REG_4, (int)devs[i].major, 6);
		out[k++] = any_minor ? MOV64_IMM(BPF_REG_0, 0) : JNE_IMM(BPF_REG_5, (int)devs[i].minor, 5);
		out[k++] = MOV32_REG(BPF_REG_0, BPF_REG_3); /* read/write only, never mknod */
		out[k++] = ALU32_IMM(BPF_AND, BPF_REG_0, BPF_DEVCG_ACC_MKNOD);
		out[k++] = JNE_IMM(BPF_REG_0, 0, 2);
		out[k++] = MOV64_IMM(BPF_REG_0, 1);
		out[k++] = EXIT();
	}
	out[k++] = MOV64_IMM(BPF_REG_0, 0);
	out[k++] = EXIT();
	return (int)k;
}

static int bpf_call(int cmd, union bpf_attr *attr)
{
	return (int)syscall(SYS_bpf, cmd, attr, sizeof(*attr));
}

int cgbpf_dev_attach(int cgroup_fd, const struct bpf_insn *insns, size_t n)
{
	union bpf_attr attr;
	int prog, rc;

	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
	attr.insns = (uint64_t)(uintptr_t)insns;
	attr.insn_cnt = (uint32_t)n;
	attr.license = (uint64_t)(uintptr_t) "GPL";
	prog = bpf_call(BPF_PROG_LOAD, &attr);
	if (prog < 0 && errno == EPERM) {
		/* before Linux 5.11 BPF programs were charged to RLIMIT_MEMLOCK */
		struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
		setrlimit(RLIMIT_MEMLOCK, &rl);
		prog = bpf_call(BPF_PROG_LOAD, &attr);
	}
	if (prog < 0)
		return fail_errno("bpf: load device program");
	memset(&attr, 0, sizeof(attr));
	attr.target_fd = (uint32_t)cgroup_fd;
	attr.attach_bpf_fd = (uint32_t)prog;
	attr.attach_type = BPF_CGROUP_DEVICE;
	/* ALLOW_MULTI: programs of ancestors also run; access needs all of them to allow */
	attr.attach_flags = BPF_F_ALLOW_MULTI;
	rc = bpf_call(BPF_PROG_ATTACH, &attr);
	if (rc < 0)
		fail_errno("bpf: attach device program");
	close(prog); /* the attachment holds its own reference */
	return rc < 0 ? -1 : 0;
}
