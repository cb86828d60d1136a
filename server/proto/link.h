/* link.h - the link between a node's labd and the head's labd-web (docs/slurm.md).
 *
 * Folder rule: proto/ includes only common/ (include/labd/), jansson and OpenSSL.
 *
 * Three things, all keyed by one shared secret (a file of 32..512 random bytes, the
 * same on the head and every node):
 *  - the stream: TLS 1.3 with an external pre-shared key (OpenSSL's PSK callbacks; the
 *    PSK identity is the node's name, the key is the secret's bytes, the cipher suite
 *    TLS_AES_128_GCM_SHA256 with an (EC)DHE exchange, so a later leak of the secret does
 *    not open recorded sessions). No certificates.
 *  - the framing on that stream: a 4-byte big-endian length, then one JSON object of
 *    at most LINK_FRAME_MAX bytes (the supervisor protocol's messages, unchanged).
 *  - the data line that opens every connection to a node's data port:
 *      "LABD-DATA1 <path> <unix_ms> <nonce: 32 hex> <hmac: 64 hex>\n"
 *    hmac = HMAC-SHA256(secret, "<path> <unix_ms> <nonce>"); accepted when
 *    |now - unix_ms| <= LINK_DATA_SKEW_MS and the nonce was not seen in the last
 *    LINK_NONCE_KEEP_MS (struct link_nonces).
 *
 * Where the secret is: root reads it at start into cfg->link_secret / link_secret_len
 * ([node] secret_file in `labd node`, [slurm] secret_file on the head, main.c); the
 * forked link or web process inherits the bytes.
 *
 * A descriptor cannot cross the link. A job_shell reply's pty master stays with the
 * node's link process under a one-time token (struct link_shells) and the reply carries
 * "shell_token" instead; the head claims the terminal through the data port
 * ("shell/<token>"). Any other descriptor is closed and its reply marked
 * "fd_dropped":true. Both fields are proto_reply's (optional).
 *
 * All calls are blocking unless said; none keeps global state beyond OpenSSL's. */
#ifndef LABD_LINK_H
#define LABD_LINK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LINK_SECRET_MIN 32
#define LINK_SECRET_MAX 512 /* OpenSSL's PSK_MAX_PSK_LEN */
#define LINK_FRAME_MAX 65536 /* = PROTO_MAX_MESSAGE */
#define LINK_NAME_MAX 64     /* a node's name: [A-Za-z0-9][A-Za-z0-9._-]{0,63} */
#define LINK_DATA_LINE_MAX 512
#define LINK_DATA_SKEW_MS 30000
#define LINK_NONCE_KEEP_MS 60000
#define LINK_HANDSHAKE_MS 10000 /* link_accept and link_dial give up past this */

/* The shared secret, read once by root. Embedded; link_secret_clear wipes it. */
struct link_secret {
	unsigned char bytes[LINK_SECRET_MAX];
	size_t len;
};
/* Reads path (a regular file, not readable or writable by others than its owner and
 * group, 32..512 bytes, used as they are). 0, -EINVAL (size) / -EPERM (mode) with
 * the reason in err, or the open's negative errno. */
int link_secret_read(const char *path, struct link_secret *out, char *err, size_t errlen);
void link_secret_clear(struct link_secret *s);
/* *out holds bytes (the copy root made in cfg->link_secret); none (len 0) when len is
 * past LINK_SECRET_MAX. */
void link_secret_set(struct link_secret *out, const unsigned char *bytes, size_t len);

/* Whether name is a node name (see LINK_NAME_MAX). */
bool link_name_ok(const char *name);

/* ---- TLS ---- */

/* A TLS context for one side. Caller frees with link_ctx_free. The secret is copied. */
struct link_ctx;
/* The node's side: it presents identity name (link_name_ok). NULL on error (logged). */
struct link_ctx *link_ctx_client(const struct link_secret *secret, const char *name);
/* The head's side: any identity that link_name_ok accepts, with the one secret. */
struct link_ctx *link_ctx_server(const struct link_secret *secret);
void link_ctx_free(struct link_ctx *ctx);

/* One TLS connection; owns its socket. Caller frees with link_conn_free (closes it). */
struct link_conn;
void link_conn_free(struct link_conn *c);
/* The peer's PSK identity (the server's view) or the own name (the client's). */
const char *link_conn_name(const struct link_conn *c);
/* The connection's socket, for poll (its readiness alone does not mean a frame is
 * there: TLS may hold bytes already read; link_relay knows). */
int link_conn_fd(const struct link_conn *c);

/* The node's side: connects to "HOST:PORT" (numeric IPv4/IPv6 or a name) and
 * handshakes, within LINK_HANDSHAKE_MS. 0 with *out, or a negative errno
 * (-ECONNREFUSED, -ETIMEDOUT, -EACCES for a handshake refused: wrong key). */
int link_dial(struct link_ctx *ctx, const char *hostport, struct link_conn **out);

/* The head's side, for one accepted socket fd (taken: closed on failure too):
 * handshakes, reads the first frame and checks it is a node_hello whose name is the
 * PSK identity (link_hello_check), all within LINK_HANDSHAKE_MS. 0 with *hello (the
 * caller's, json_decref) and *out, or a negative errno: -EACCES (handshake refused:
 * wrong key or identity), -EPROTO (bad hello; reason logged), -ETIMEDOUT. */
int link_accept(struct link_ctx *ctx, int fd, json_t **hello, struct link_conn **out);

/* The first frame the node sends:
 *   {"type":"node_hello","name":N,"data":"HOST:PORT","gpus":[minor,...],
 *    "cpus":C,"memory_bytes":M[,"version":V]}
 * version: the node's labd version (optional). gpus: the node's GPU device minors in gres.conf order (index i of Slurm's
 * GRES IDX is gpus[i]); cpus >= 1; memory_bytes >= 1. 0 or -EPROTO with the reason
 * in err. expect_name: the PSK identity it must equal (NULL: not checked). */
int link_hello_check(json_t *hello, const char *expect_name, char *err, size_t errlen);

/* Framing over a connection (blocking; for the hello and tests; link_relay does its
 * own non-blocking framing). write: 0 or negative errno (-EMSGSIZE over the bound).
 * read: 0 with *out (caller's), 1 on orderly close, -EPROTO for a bad frame (length
 * 0 or over LINK_FRAME_MAX, not a JSON object), another negative errno. */
int link_frame_write(struct link_conn *c, json_t *msg);
int link_frame_read(struct link_conn *c, json_t **out);
/* Writes len raw bytes (no framing): what tests of the peer's framing send. */
int link_write_bytes(struct link_conn *c, const void *bytes, size_t len);

/* ---- job shells kept by a node's link ---- */

#define LINK_SHELL_TOKEN_BYTES 16 /* 128 random bits */
#define LINK_SHELL_TOKEN_HEX (2 * LINK_SHELL_TOKEN_BYTES)
#define LINK_SHELL_CLAIM_MS 5000 /* an unclaimed terminal is closed after this */
#define LINK_SHELLS_MAX 128      /* = the supervisor's live shells (HOST_SHELLS_LIVE_MAX) */

/* The pty masters a node's link holds for the head: each kept under a fresh random
 * token, claimed once (the data port then splices the terminal with the head's
 * connection), closed when not claimed within LINK_SHELL_CLAIM_MS. A claimed one stays
 * listed, for resizes, until its claimer says it is done. Thread-safe (the relay keeps,
 * the data port's threads claim, resize and expire). Times are the caller's clock_ms. */
struct link_shells;
struct link_shells *link_shells_new(void);
/* Closes every terminal not claimed; the claimed ones are their claimers'. */
void link_shells_free(struct link_shells *t);
/* Keeps fd (taken: closed on failure too) under a fresh token, written as
 * LINK_SHELL_TOKEN_HEX lowercase hex and a NUL into token. 0, -EBUSY (full), -EIO. */
int link_shells_keep(struct link_shells *t, int fd, long long now_ms, char *token);
/* The terminal kept under token, once: its fd (the claimer's to close after
 * link_shells_done), or -ENOENT (unknown, claimed already, or expired). */
int link_shells_claim(struct link_shells *t, const char *token, long long now_ms);
/* Sets the size of the terminal under token, waiting or claimed (TIOCSWINSZ: the shell
 * gets SIGWINCH). 0, -EINVAL (a size outside 1..1000), -ENOENT (none under token), or
 * the ioctl's negative errno. */
int link_shells_resize(struct link_shells *t, const char *token, int cols, int rows);
/* The claimer of token is done: the entry goes (the caller closes the fd after). */
void link_shells_done(struct link_shells *t, const char *token);
/* Closes the terminals whose claim time passed; how many. */
int link_shells_expire(struct link_shells *t, long long now_ms);
/* How many terminals wait for their claim (tests). */
int link_shells_waiting(struct link_shells *t);

/* Relays until either side closes or fails: each SOCK_SEQPACKET message read from
 * seq_fd becomes one frame on c, each frame from c one message on seq_fd. A message
 * that arrives on seq_fd with a descriptor (SCM_RIGHTS) goes on without it: a pty
 * master (job_shell's) is kept in shells under a token and the message gets
 * "shell_token":T; any other descriptor (or one shells has no room for, or shells
 * NULL) is closed and the message gets "fd_dropped":true. stop_fd (-1: none):
 * readable = return at once (an eventfd or pipe the caller writes to end the relay;
 * shutdown(seq_fd) from the other end works as well). Does not free c or close
 * seq_fd. 0 when a side closed in order or stop_fd fired, -EPROTO for a bad frame,
 * another negative errno on error. */
int link_relay(struct link_conn *c, int seq_fd, int stop_fd, struct link_shells *shells);

/* ---- the data line ---- */

/* Makes the line for path (no spaces or control bytes, <= 200 bytes) at now_ms with
 * a fresh random nonce into out (LINK_DATA_LINE_MAX, '\n'-terminated, NUL after it).
 * Returns its length, or a negative errno. */
int link_data_line_make(const struct link_secret *secret, const char *path, long long now_ms,
			char *out, size_t outlen);

/* Nonces seen in the last LINK_NONCE_KEEP_MS, at most cap of them (a full cache
 * refuses new lines: -EBUSY, rather than forget one early). Not thread-safe: the
 * caller serialises. Caller frees with link_nonces_free. */
struct link_nonces;
struct link_nonces *link_nonces_new(size_t cap);
void link_nonces_free(struct link_nonces *n);

/* Checks one line (without or with its '\n'; NUL-terminated) at now_ms: format, time
 * within LINK_DATA_SKEW_MS, HMAC, nonce not seen (and then remembers it). 0 with the
 * path copied into path (pathlen >= 201), or -EPROTO (format), -ETIME (stale),
 * -EACCES (bad HMAC), -EALREADY (replayed nonce), -EBUSY (cache full). A refused line
 * leaves the cache as it was. */
int link_data_line_check(const struct link_secret *secret, struct link_nonces *seen,
			 const char *line, long long now_ms, char *path, size_t pathlen);

/* Whether path is "runtimes/<user name>/run/jupyter.sock" (a runtime's socket, the
 * path a runtime's endpoint names; user name as proto's PROTO_NAME). */
bool link_data_path_ok(const char *path);

/* Whether path is "joblogs/<id>.log@<offset>" (the other data path a node serves: its
 * job log's bytes from offset on; id >= 1 and offset >= 0, decimal without sign or
 * leading zeros, at most INT64_MAX); the two into *job_id and *offset when it is. */
bool link_data_joblog_ok(const char *path, int64_t *job_id, int64_t *offset);
/* That path for job_id and offset into out. 0, -EINVAL (id < 1, offset < 0) or
 * -ENOSPC. */
int link_data_joblog_path(int64_t job_id, int64_t offset, char *out, size_t outlen);

/* Whether path is "shell/<token>" (the claim of a kept terminal: *cols = *rows = 0) or
 * "shell/<token>@<cols>x<rows>" (a resize of that terminal, each 1..1000, decimal
 * without leading zeros); token (LINK_SHELL_TOKEN_HEX lowercase hex) into token
 * (LINK_SHELL_TOKEN_HEX + 1 bytes) when it is. */
bool link_data_shell_ok(const char *path, char *token, int *cols, int *rows);
/* That path for token (cols = rows = 0: the claim) into out. 0, -EINVAL or -ENOSPC. */
int link_data_shell_path(const char *token, int cols, int rows, char *out, size_t outlen);

/* Connects to a node's data port at hostport ("HOST:PORT", numeric; "[V6]:PORT")
 * within timeout_ms and writes the data line for path signed with secret: what the
 * proxy does for a runtime and the head for a job log. The connected socket
 * (non-blocking), or a negative errno: -EINVAL for a malformed hostport or path,
 * -ENOKEY for a secret of 0 bytes, -ETIMEDOUT, the connect's. */
int link_data_connect(const struct link_secret *secret, const char *hostport, const char *path,
		      int timeout_ms);

#endif
