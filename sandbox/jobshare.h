/* jobshare.h - the copy of a job's working folder and input channels from algo-1 to
 * the other hosts of a job on several nodes (docs/jobs.md "Several hosts").  Only
 * algo-1 mounts the user's home; before the command starts, its agent sends those
 * folders over the hosts' network (peer0) and each other host's agent writes them into
 * the same paths of its scratch home.  Both sides run as the sandbox's user, in the
 * job's process before its exec; libc only (linked into the static agent).
 *
 * The stream, server to client, is records until the end:
 *   "D <root> <mode> 0 <len>\n<path>"          a folder
 *   "F <root> <mode> <size> <len>\n<path><data>" a regular file of size bytes
 *   "E 0 0 0 0\n"                              the end
 * root is an index into both sides' list of folders, path is relative to it (no
 * leading '/', no "." or ".." component), a folder comes before what is in it.
 * Links, devices, FIFOs and sockets are left out. */
#ifndef LABD_SANDBOX_JOBSHARE_H
#define LABD_SANDBOX_JOBSHARE_H

#include <stddef.h>
#include <stdint.h>

#define JOBSHARE_PORT 29400   /* on algo-1's peer address; torchrun's is 29500 */
#define JOBSHARE_MAX_HOSTS 63 /* peers of algo-1: a job has at most 64 hosts */
#define JOBSHARE_MAX_ROOTS 64 /* the working folder and the channels (at most 63) */
#define JOBSHARE_PATH_MAX 4095
#define JOBSHARE_DEPTH_MAX 64
#define JOBSHARE_WAIT_S 600    /* for every host to connect, for algo-1 to listen */

struct jobshare_count {
	uint64_t files, bytes;
};

/* algo-1: listens on addr:port and sends roots[0..n) to each of `peers`
 * connections, each in a child of its own (all at once); the peers must all have
 * come within timeout_s. *sent is what each got. 0, or -1 with err set. */
int jobshare_serve(const char *addr, int port, int peers, char *const roots[], size_t n,
		   int timeout_s, struct jobshare_count *sent, char *err, size_t errlen);
/* Another host: connects to addr:port (retried while refused, until timeout_s) and
 * writes what comes into roots[0..n), which must exist. 0, or -1 with err set. */
int jobshare_fetch(const char *addr, int port, char *const roots[], size_t n, int timeout_s,
		   struct jobshare_count *got, char *err, size_t errlen);
/* Whether path is one a record may carry (relative, no "", "." or ".." part). */
int jobshare_path_ok(const char *path);

#endif
