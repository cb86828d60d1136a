/* probe.c - runs inside a sandbox and prints what one attempt gave: "OK", an errno
 * name ("EPERM"), or a measured value.  Used by tests/security/run.sh; every case
 * prints exactly one line so the suite can assert the exact result.
 *
 * The suite also runs the same cases outside any sandbox (as host root, as a
 * capability-less uid, under the seccomp filter alone) as positive controls, so every
 * case is harmless there too: arguments are chosen so that a call that gets past the
 * defences fails on them (kexec_load with too many segments, init_module of nothing)
 * or changes only the probe's own private namespaces.
 *
 * The "-e" cases (mount-efault, umount-einval, chroot-enoent, setns-ebadf,
 * unshare-einval) pass an
 * argument the kernel rejects *before* it checks capabilities: without seccomp even
 * a process with no capability gets EFAULT/EINVAL/ENOENT/EBADF, so EPERM can only
 * come from the filter, which runs before the system call. */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/magic.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

static int res(long rc)
{
	if (rc >= 0) {
		puts("OK");
		return 0;
	}
	puts(strerrorname_np(errno) ? strerrorname_np(errno) : "E?");
	return 0;
}

static long num(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*end) {
		fprintf(stderr, "probe: bad number %s\n", s);
		exit(2);
	}
	return v;
}

static void list_dir_numbers(const char *path, int skip_fd)
{
	DIR *d = opendir(path);
	struct dirent *e;
	long v[4096];
	int n = 0;

	if (!d) {
		res(-1);
		return;
	}
	while ((e = readdir(d)) && n < 4096) {
		char *end;
		long x = strtol(e->d_name, &end, 10);
		if (*end || e->d_name[0] == '\0' || e->d_name[0] == '.')
			continue;
		if (skip_fd && x == dirfd(d))
			continue;
		v[n++] = x;
	}
	closedir(d);
	for (int i = 0; i < n; i++) /* tiny insertion sort */
		for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
			long t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	for (int i = 0; i < n; i++)
		printf("%s%ld", i ? " " : "", v[i]);
	putchar('\n');
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	const char *a = argc > 2 ? argv[2] : "";

	if (!strcmp(c, "mount"))
		return res(mount("none", "/tmp", "tmpfs", 0, NULL));
	if (!strcmp(c, "mount-efault")) /* the fs type is copied in before may_mount() */
		return res(mount("none", "/tmp", (const char *)1, 0, NULL));
	if (!strcmp(c, "umount")) /* umount [PATH]: detach PATH (default /) */
		return res(umount2(a[0] ? a : "/", MNT_DETACH));
	if (!strcmp(c, "umount-einval")) /* unknown flags are refused before may_mount() */
		return res(umount2("/", ~0));
	if (!strcmp(c, "pivot_root"))
		return res(syscall(SYS_pivot_root, "/tmp", "/tmp"));
	if (!strcmp(c, "chroot"))
		return res(chroot("/tmp"));
	if (!strcmp(c, "chroot-enoent")) /* the path is looked up before CAP_SYS_CHROOT */
		return res(chroot("/nonexistent-labd-probe"));
	if (!strcmp(c, "unshare-user"))
		return res(unshare(CLONE_NEWUSER));
	if (!strcmp(c, "unshare-mnt"))
		return res(unshare(CLONE_NEWNS));
	if (!strcmp(c, "unshare-einval")) /* CLONE_PARENT is refused before any capability */
		return res(unshare(CLONE_NEWNS | CLONE_PARENT));
	if (!strcmp(c, "clone-newuser")) {
		long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, NULL);
		if (pid == 0)
			_exit(0);
		if (pid > 0)
			waitpid((pid_t)pid, NULL, 0);
		return res(pid);
	}
	if (!strcmp(c, "clone3"))
		return res(syscall(SYS_clone3, NULL, 0));
	if (!strcmp(c, "setns")) {
		int fd = open("/proc/self/ns/net", O_RDONLY);
		return res(fd < 0 ? fd : setns(fd, 0));
	}
	if (!strcmp(c, "setns-ebadf")) /* the fd is looked up before any capability */
		return res(setns(-1, 0));
	if (!strcmp(c, "ptrace-init"))
		return res(ptrace(PTRACE_ATTACH, 1, NULL, NULL));
	if (!strcmp(c, "ptrace-child")) { /* positive control: profilers need ptrace */
		pid_t p = fork();
		if (p == 0) {
			pause();
			_exit(0);
		}
		long rc = ptrace(PTRACE_ATTACH, p, NULL, NULL);
		kill(p, SIGKILL);
		waitpid(p, NULL, 0);
		return res(rc);
	}
	if (!strcmp(c, "bpf")) {
		union bpf_attr attr;
		memset(&attr, 0, sizeof(attr));
		return res(syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr)));
	}
	if (!strcmp(c, "keyctl"))
		return res(syscall(SYS_keyctl, 0 /* GET_KEYRING_ID */, -3, 0));
	if (!strcmp(c, "add_key"))
		return res(syscall(SYS_add_key, "user", "x", "y", 1, -3));
	if (!strcmp(c, "perf_event_open"))
		return res(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
	if (!strcmp(c, "init_module"))
		return res(syscall(SYS_init_module, NULL, 0, ""));
	if (!strcmp(c, "finit_module"))
		return res(syscall(SYS_finit_module, -1, "", 0));
	if (!strcmp(c, "kexec_load")) /* 17 segments: one more than KEXEC_SEGMENT_MAX */
		return res(syscall(SYS_kexec_load, 0, 17, NULL, 0));
	if (!strcmp(c, "userfaultfd"))
		return res(syscall(SYS_userfaultfd, 0));
	if (!strcmp(c, "io_uring_setup"))
		return res(syscall(SYS_io_uring_setup, 1, NULL));
	if (!strcmp(c, "open_by_handle_at"))
		return res(syscall(SYS_open_by_handle_at, -1, NULL, 0));
	if (!strcmp(c, "memfd_create"))
		return res(memfd_create("cuda", 0));
	if (!strcmp(c, "pidfd_open"))
		return res(syscall(SYS_pidfd_open, getpid(), 0));
	if (!strcmp(c, "tiocsti")) {
		/* high bits set: the filter must compare the low 32 bits (CVE-2019-10063) */
		int fd = open("/dev/null", O_RDONLY);
		char ch = 'x';
		return res(syscall(SYS_ioctl, fd, (unsigned long)TIOCSTI | (1UL << 32), &ch));
	}
	if (!strcmp(c, "tiocsetd") || !strcmp(c, "tioclinux")) { /* on /dev/null: ENOTTY past the filter */
		int fd = open("/dev/null", O_RDONLY), ldisc = 0;
		unsigned long cmd = !strcmp(c, "tiocsetd") ? TIOCSETD : TIOCLINUX;
		return res(syscall(SYS_ioctl, fd, cmd | (1UL << 32), &ldisc));
	}
	if (!strcmp(c, "personality")) { /* personality HEX: the raw 64-bit argument */
		long rc = syscall(SYS_personality, strtoul(a, NULL, 16));
		if (rc >= 0 && strcmp(a, "ffffffff") != 0)
			syscall(SYS_personality, 0UL); /* undo: the probe exits anyway */
		return res(rc);
	}
	if (!strcmp(c, "socket")) { /* socket FAMILY TYPE [PROTO], numbers */
		long proto = argc > 4 ? num(argv[4]) : 0;
		return res(socket((int)num(a), (int)(argc > 3 ? num(argv[3]) : SOCK_STREAM), (int)proto));
	}
	if (!strcmp(c, "af_alg"))
		return res(socket(AF_ALG, SOCK_SEQPACKET, 0));
	if (!strcmp(c, "af_vsock"))
		return res(socket(AF_VSOCK, SOCK_STREAM, 0));
	if (!strcmp(c, "int80")) { /* i386 ABI: not the native arch, the filter kills */
		pid_t p = fork();
		int st;
		if (p == 0) {
			long r;
			__asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory");
			_exit(r > 0 ? 0 : 1);
		}
		waitpid(p, &st, 0);
		if (WIFSIGNALED(st))
			puts(sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "SIG?");
		else
			printf("exit %d\n", WEXITSTATUS(st));
		return 0;
	}
	if (!strcmp(c, "status")) { /* print one /proc/self/status field */
		FILE *f = fopen("/proc/self/status", "r");
		char line[256];
		size_t n = strlen(a);
		while (f && fgets(line, sizeof(line), f))
			if (!strncmp(line, a, n) && line[n] == ':') {
				char *v = line + n + 1;
				while (*v == ' ' || *v == '\t')
					v++;
				fputs(v, stdout);
				return 0;
			}
		puts("absent");
		return 0;
	}
	if (!strcmp(c, "euid")) {
		printf("%d\n", (int)geteuid());
		return 0;
	}
	if (!strcmp(c, "pids")) {
		list_dir_numbers("/proc", 0);
		return 0;
	}
	if (!strcmp(c, "fds")) {
		list_dir_numbers("/proc/self/fd", 1);
		return 0;
	}
	if (!strcmp(c, "hostname")) {
		struct utsname u;
		uname(&u);
		puts(u.nodename);
		return 0;
	}
	if (!strcmp(c, "connect")) { /* connect 127.0.0.1:PORT */
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)num(a))};
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
		return res(connect(fd, (struct sockaddr *)&sa, sizeof(sa)));
	}
	if (!strcmp(c, "read")) { /* read a file: OK <bytes> or errno */
		char buf[65536];
		int fd = open(a, O_RDONLY);
		long n;
		if (fd < 0)
			return res(-1);
		n = read(fd, buf, sizeof(buf));
		if (n < 0)
			return res(-1);
		printf("OK %ld\n", n);
		return 0;
	}
	if (!strcmp(c, "open")) /* open a path read-only */
		return res(open(a, O_RDONLY));
	if (!strcmp(c, "openrw"))
		return res(open(a, O_RDWR));
	if (!strcmp(c, "write")) /* open for writing, creating */
		return res(open(a, O_WRONLY | O_CREAT, 0644));
	if (!strcmp(c, "mkdir"))
		return res(mkdir(a, 0755));
	if (!strcmp(c, "mknod")) /* mknod PATH [fifo]: /dev/null's device, or a FIFO */
		return res(mknod(a, (argc > 3 && !strcmp(argv[3], "fifo") ? S_IFIFO : S_IFCHR) | 0600,
				 makedev(1, 3)));
	if (!strcmp(c, "mknoddev") && argc > 4) /* mknoddev PATH MAJOR MINOR: a char device */
		return res(mknod(a, S_IFCHR | 0600, makedev(strtoul(argv[3], NULL, 10),
							    strtoul(argv[4], NULL, 10))));
	if (!strcmp(c, "env")) { /* env NAME: its value, or "unset" */
		const char *v = getenv(a);
		puts(v ? v : "unset");
		return 0;
	}
	if (!strcmp(c, "fs")) { /* fs PATH: file system type, mode, ro|rw */
		struct statfs sf;
		struct statvfs sv;
		struct stat st;
		if (statfs(a, &sf) < 0 || statvfs(a, &sv) < 0 || stat(a, &st) < 0)
			return res(-1);
		switch ((unsigned long)sf.f_type) {
		case TMPFS_MAGIC: fputs("tmpfs", stdout); break;
		case PROC_SUPER_MAGIC: fputs("proc", stdout); break;
		case SYSFS_MAGIC: fputs("sysfs", stdout); break;
		case EXT4_SUPER_MAGIC: fputs("ext4", stdout); break;
		case OVERLAYFS_SUPER_MAGIC: fputs("overlay", stdout); break;
		default: printf("0x%lx", (unsigned long)sf.f_type);
		}
		printf(" %03o %s\n", (unsigned)(st.st_mode & 07777), sv.f_flag & ST_RDONLY ? "ro" : "rw");
		return 0;
	}
	if (!strcmp(c, "stat")) {
		struct stat st;
		return res(stat(a, &st));
	}
	if (!strcmp(c, "fill")) { /* write 1 MiB chunks until an error: errno + MiB */
		static char buf[1 << 20];
		int fd = open(a, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		long mib = 0;
		memset(buf, 'x', sizeof(buf));
		if (fd < 0)
			return res(-1);
		for (;;) {
			ssize_t w = write(fd, buf, sizeof(buf));
			if (w < (ssize_t)sizeof(buf)) {
				if (w >= 0) {
					w = write(fd, buf, sizeof(buf)); /* a short write: the next one fails */
				}
				if (w < 0 || fsync(fd) < 0) {
					printf("%s %ld\n", strerrorname_np(errno), mib);
					return 0;
				}
			}
			mib++;
		}
	}
	if (!strcmp(c, "fillplaces")) { /* fillplaces MIB DIR...: "DIR ERRNO|FULL" per dir, then fd 0;
					  * the files stay (the suite measures the disk meanwhile) */
		static char buf[1 << 20];
		long limit = num(a);
		memset(buf, 'x', sizeof(buf));
		for (int i = 3; i < argc; i++) {
			char path[4096];
			long mib = 0;
			int fd;
			snprintf(path, sizeof(path), "%s/.labd-fill", argv[i]);
			fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
			while (fd >= 0 && mib < limit && write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf))
				mib++;
			if (fd >= 0 && mib < limit && errno == 0)
				errno = ENOSPC; /* a short write: the file system is full */
			printf("%s %s\n", argv[i], fd >= 0 && mib >= limit ? "FULL" : strerrorname_np(errno));
			if (fd >= 0)
				close(fd);
			errno = 0;
		}
		printf("fd0 %s\n", write(0, buf, sizeof(buf)) >= 0 ? "OK" : strerrorname_np(errno));
		fflush(stdout);
		return 0;
	}
	if (!strcmp(c, "forkbomb")) { /* fork until failure: errno name + forks made */
		long n = 0;
		for (;;) {
			pid_t p = fork();
			if (p == 0) {
				sleep(30);
				_exit(0);
			}
			if (p < 0)
				break;
			n++;
		}
		printf("%s %ld\n", strerrorname_np(errno), n);
		fflush(stdout);
		sleep((unsigned)(a[0] ? num(a) : 0));
		kill(-1, SIGKILL); /* everything but us in this pid namespace */
		return 0;
	}
	if (!strcmp(c, "memhog")) { /* touch memory until killed */
		for (long mib = 0;; mib++) {
			char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (p == MAP_FAILED)
				return res(-1);
			memset(p, 1, 1 << 20);
		}
	}
	if (!strcmp(c, "cpuhog")) { /* N busy processes for 2 s: CPUs used, in percent */
		long n = a[0] ? num(a) : 2;
		double t0 = now(), wall;
		struct rusage ru;
		for (long i = 0; i < n; i++)
			if (fork() == 0) {
				while (now() - t0 < 2.0) {
				}
				_exit(0);
			}
		while (wait(NULL) > 0) {
		}
		wall = now() - t0;
		getrusage(RUSAGE_CHILDREN, &ru);
		printf("%.0f\n", 100.0 * ((double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
					  (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6) / wall);
		return 0;
	}
	if (!strcmp(c, "setuid0"))
		return res(setuid(0));
	fprintf(stderr, "probe: unknown case %s\n", c);
	return 2;
}
