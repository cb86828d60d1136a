/* keeperwire.h - what goes over a keeper's socket (private to keeper*.c).
 *
 * SOCK_SEQPACKET: one request per connection, one fixed-size message each way,
 * fds as SCM_RIGHTS (a set_log's log, a fetch's held fds).  Anything else (a short
 * or long message, an unknown op or magic, an fd where none belongs) is answered
 * -EINVAL and changes nothing. */
#ifndef LABD_KEEPERWIRE_H
#define LABD_KEEPERWIRE_H

#include <stdint.h>

#define KEEPER_MAGIC 0x6b656570u /* "keep" */

enum keeper_op { KEEPER_OP_FETCH = 1, KEEPER_OP_SET_LOG, KEEPER_OP_SYNC, KEEPER_OP_STOP };

struct keeper_req {
	uint32_t magic, op;
	uint64_t max_bytes, written_bytes; /* set_log */
};

struct keeper_rep {
	int32_t rc;
	uint32_t n_fds;   /* fetch: how many came with the reply */
	uint64_t written; /* sync: bytes the current log holds */
};

/* The keeper process's body (keeperproc.c): never returns.  ready is the pipe
 * end keeper_start waits on (one int: 0 or -errno, once set up); listen_fd the
 * bound, listening socket. */
struct keeper_spec;
_Noreturn void keeper_run(const struct keeper_spec *ks, int listen_fd, int ready);

#endif
