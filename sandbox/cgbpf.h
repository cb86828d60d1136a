/* cgbpf.h - the cgroup v2 device controller: a BPF_PROG_TYPE_CGROUP_DEVICE
 * program that allows exactly a list of devices (modelled on crun's ebpf.c). */
#ifndef LABD_CGROUP_BPF_H
#define LABD_CGROUP_BPF_H

#include <linux/bpf.h>
#include <stddef.h>

#include "sandbox/cgbox.h"

/* Most instructions a program for CGBOX_MAX_DEVS rules can take. */
#define CGBPF_MAX_INSNS (8 + 8 * CGBOX_MAX_DEVS)

/* Emits the program into out[max]: allow (return 1) when type, major and minor match a
 * rule (any access but mknod), else return 0 (EPERM).  Returns the instruction count,
 * or -1 if it does not fit.  Pure. */
int cgbpf_dev_build(const struct cgbox_dev *devs, size_t n, struct bpf_insn *out, size_t max);
/* Loads the program (raising RLIMIT_MEMLOCK for kernels before 5.11) and attaches it to
 * the cgroup directory fd with BPF_F_ALLOW_MULTI.  0 or -1. */
int cgbpf_dev_attach(int cgroup_fd, const struct bpf_insn *insns, size_t n);

#endif
