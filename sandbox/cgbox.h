/* cgbox.h - one sandbox's cgroup(s) on cgroup v1, hybrid and v2 hosts.
 *
 * The mount table names the hierarchies (libcgroup's cgroup_init +
 * cgroup_get_subsys_mount_point for any it does not show); the
 * knobs are written here per version, because libcgroup maps v1<->v2 only for cpu,
 * cpuset and memory while pids, io/blkio and devices differ (docs/sandbox.md).  All
 * paths hang off a struct cgbox_layout, so the unit tests point it at a fake tree.
 */
#ifndef LABD_CGBOX_H
#define LABD_CGBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum cgbox_mode {
	CGBOX_V1, /* legacy or hybrid: each controller on its own v1 hierarchy */
	CGBOX_V2, /* unified: everything in one v2 hierarchy */
};

/* v1 controllers we use, indexes into cgbox_layout.v1.  CGBOX_CPUACCT (the CPU time
 * used) may share the cpu hierarchy or have its own.  CGBOX_UNIFIED is no controller:
 * the controller-less v2 tree of a hybrid host (/sys/fs/cgroup/unified), where a
 * sandbox's cgroup gives its I/O pressure (io.pressure) and CPU time (cpu.stat). */
enum cgbox_ctl {
	CGBOX_MEMORY, CGBOX_CPU, CGBOX_PIDS, CGBOX_BLKIO, CGBOX_DEVICES, CGBOX_FREEZER,
	CGBOX_CPUACCT, CGBOX_UNIFIED, CGBOX_NCTL
};

struct cgbox_layout {
	enum cgbox_mode mode;
	char v1[CGBOX_NCTL][256]; /* mount point per controller, "" when absent (v1) */
	char v2[256];             /* unified mount point (v2 mode) */
	bool bpf_devices;         /* v2: attach the BPF device program (false in unit tests) */
};

struct cgbox_dev {
	char type; /* 'c' or 'b' */
	unsigned major, minor;
};

#define CGBOX_MAX_DEVS 72

struct cgbox_limits {
	uint64_t mem_bytes;  /* 0 = none */
	uint32_t cpu_milli;  /* 0 = none */
	uint32_t pids_max;   /* 0 = none */
	uint32_t io_weight;  /* v2 scale 1..10000, 0 = leave */
	uint64_t io_write_bytes_per_s; /* 0 = none */
	unsigned io_major, io_minor; /* the device io_write_bytes_per_s applies to */
	bool devices;        /* restrict devices to devs[] */
	struct cgbox_dev devs[CGBOX_MAX_DEVS];
	size_t n_devs;
};

/* Fills *lo for this host (statfs of /sys/fs/cgroup, the mount table, libcgroup);
 * 0 or -1. */
int cgbox_detect(struct cgbox_layout *lo);
/* What the host's cgroups lack that a sandbox's limits rely on (cgroup v1 without the
 * pids controller, or without memory.memsw.* swap accounting; v2 without the memory or
 * pids controller): up to max static sentences in out, meant for the start-up log and
 * the admin health view.  Returns how many. */
int cgbox_gaps(const struct cgbox_layout *lo, const char **out, int max);
/* This host's layout, detected on first use and kept for the process; NULL (with the
 * reason reported once) when no usable hierarchy exists. */
const struct cgbox_layout *cgbox_host(void);
/* The names of the controllers, for messages and the v1 layout ("memory", ...). */
const char *cgbox_ctl_name(enum cgbox_ctl c);
/* Creates <parent>/<name> in every hierarchy and applies lim; on failure removes what
 * it made.  parent and name are single path components (checked). 0 or -1. */
int cgbox_create(const struct cgbox_layout *lo, const char *parent, const char *name,
		 const struct cgbox_limits *lim);
/* cgbox_create in two: the cgroups (removed again on failure), then their limits
 * (on failure the caller removes them).  A sandbox start makes them before the
 * clone, so that the child is born inside, and writes the limits while the child
 * builds its file system: both before it runs anything but labd's own code. */
int cgbox_make(const struct cgbox_layout *lo, const char *parent, const char *name);
int cgbox_limit(const struct cgbox_layout *lo, const char *parent, const char *name,
		const struct cgbox_limits *lim);
/* Moves pid into the cgroup(s); 0 or -1. */
int cgbox_attach(const struct cgbox_layout *lo, const char *parent, const char *name, pid_t pid);

/* A child born in its cgroups.  Moving a process (cgroup.procs) takes the kernel's
 * global threadgroup lock, whose first writer after a quiet moment waits out an RCU
 * grace period: 4-20 ms on a busy 2-core host, most of a sandbox start.  A thread
 * moving itself (v1 "tasks", "0") skips that lock, and clone3(CLONE_INTO_CGROUP)
 * places a child in a v2 cgroup without any move.  So before the clone the calling
 * thread moves itself into the sandbox's v1 cgroups and opens its v2 cgroup
 * (cgbox_birth_enter); the child is cloned into all of them; the thread then moves
 * back (cgbox_birth_leave).  Whatever was not entered (a hierarchy whose own cgroup
 * could not be found, clone3 refused) is attached afterwards with cgbox_attach_rest. */
struct cgbox_birth {
	int into_fd;                /* v2 (or hybrid unified) cgroup dir for CLONE_INTO_CGROUP, or -1 */
	bool inherited[CGBOX_NCTL]; /* the child gets this hierarchy's cgroup at birth */
	char from[CGBOX_NCTL][512]; /* v1: the thread's own cgroup dir, to go back to */
	bool in;                    /* v1: the thread may be inside: leave moves it back */
};
/* Enters what it can of <parent>/<name> (above); 0, or -1 after going back. */
int cgbox_birth_enter(const struct cgbox_layout *lo, const char *parent, const char *name,
		      struct cgbox_birth *b);
/* The calling thread back into its own cgroups, into_fd closed; 0, or -1 when a
 * hierarchy took it neither back nor at its root (it is then still inside). */
int cgbox_birth_leave(const struct cgbox_layout *lo, struct cgbox_birth *b);
/* After the clone: pid into the hierarchies it did not inherit; 0 or -1.  into_taken
 * says whether the clone used into_fd. */
int cgbox_attach_rest(const struct cgbox_layout *lo, const char *parent, const char *name,
		      pid_t pid, const struct cgbox_birth *b, bool into_taken);
/* Number of OOM kills so far (v1 memory.oom_control oom_kill, v2 memory.events
 * oom_kill); 0 when unknown.  */
uint64_t cgbox_oom_kills(const struct cgbox_layout *lo, const char *parent, const char *name);
/* What a sandbox's cgroup has used (sandbox_usage); -1 where the host cannot say. */
struct cgbox_usage {
	int64_t cpu_usage_us;       /* cumulative: v2 cpu.stat usage_usec, v1 cpuacct.usage */
	int64_t memory_bytes;       /* v2 memory.current, v1 memory.usage_in_bytes */
	int64_t memory_limit_bytes; /* 0 when none */
	int64_t io_wait_us;         /* cumulative io.pressure "some" total (v2, hybrid) */
	int64_t oom_kills;          /* cumulative OOM kills (cgbox_oom_kills) */
};

/* Reads the counters of <parent>/<name>; 0, or -1 when its memory cgroup is gone. */
int cgbox_usage(const struct cgbox_layout *lo, const char *parent, const char *name,
		struct cgbox_usage *u);
/* Counts the processes in the cgroup (pids / memory / unified); -1 on error. */
int cgbox_nprocs(const struct cgbox_layout *lo, const char *parent, const char *name);
/* SIGKILLs every process in the cgroup until it is empty (freezing it first where a
 * freezer exists, v2 cgroup.kill when present); 0, or -1 after a bounded wait. */
int cgbox_kill(const struct cgbox_layout *lo, const char *parent, const char *name);
/* Removes the cgroup(s); missing ones are not an error.  0 or -1. */
int cgbox_remove(const struct cgbox_layout *lo, const char *parent, const char *name);
/* Builds "<hierarchy>/<parent>/<name>" for controller c (v2: c is ignored). */
int cgbox_path(const struct cgbox_layout *lo, enum cgbox_ctl c, const char *parent,
	       const char *name, char *buf, size_t size);

#endif
