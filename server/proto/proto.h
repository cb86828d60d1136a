/* proto.h - the supervisor protocol, shared by labd (root) and labd-web.
 *
 * Folder rule: proto/ includes only common/ (include/labd/) and jansson. It is
 * root-side code: no store, no HTTP.
 *
 * One JSON object per SOCK_SEQPACKET message, at most PROTO_MAX_MESSAGE bytes:
 *   {"v":2, "type":T, "id":N, ...fields}
 * Requests (web -> supervisor) carry an id; the reply to request N is
 *   {"v":2, "type":"reply", "id":N, "ok":true, ...} or
 *   {"v":2, "type":"reply", "id":N, "ok":false, "code":C, "message":M}
 * and comes when the work is done, possibly after other replies and events.
 * Events (supervisor -> web) have no id and are pushed unasked:
 *   sandbox_ready, sandbox_ended, sandbox_warning, and for job sandboxes
 *   ("pools", docs/jobs.md) pool_ready, pool_ended, job_phase, job_exited,
 *   job_sample.
 *
 * The field lists below are the contract. Each side has one table that names,
 * for every type it accepts, these fields, the channel states that may send it
 * and its handler (supervisor/channel.c, backend/local.c); a message that is
 * unknown, unpermitted or carries a field out of bounds ends the channel. */
#ifndef LABD_PROTO_H
#define LABD_PROTO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define PROTO_VERSION 2
#define PROTO_MAX_MESSAGE 65536
#define PROTO_MAX_FIELDS 12

enum proto_kind {
	PROTO_STRING,    /* min..max = length in bytes */
	PROTO_NAME,      /* a user name: ^[a-z0-9][a-z0-9._-]{0,31}$ */
	PROTO_TOKEN,     /* [A-Za-z0-9_-], min..max characters */
	PROTO_INT,       /* min..max = value */
	PROTO_BOOL,
	PROTO_INT_ARRAY, /* min..max = length; each element an integer >= 0 */
	PROTO_LIST,      /* an array whose elements the reader checks */
	PROTO_UUID_ARRAY, /* min..max = length; each element a device uuid (labd/gpucaps.h) */
};

struct proto_field {
	const char *name;
	enum proto_kind kind;
	long long min, max;
	bool optional;
};

/* Field lists, NULL-name terminated; see the header comment. */
extern const struct proto_field proto_hello[];
extern const struct proto_field proto_empty[];
extern const struct proto_field proto_sandbox_start[];
extern const struct proto_field proto_sandbox_stop[];
extern const struct proto_field proto_user_deleted[];
extern const struct proto_field proto_home_usage[];
extern const struct proto_field proto_home_resize[];
extern const struct proto_field proto_reply[];
extern const struct proto_field proto_sandbox_ready[];
extern const struct proto_field proto_sandbox_ended[];
extern const struct proto_field proto_sandbox_warning[];
/* job sandboxes: requests */
extern const struct proto_field proto_pool_start[];
extern const struct proto_field proto_pool_stop[];
extern const struct proto_field proto_job_run[];
extern const struct proto_field proto_job_stop[];
/* a shell in a running job: job key fields, cols, rows; the ok reply carries the
 * pty's master as SCM_RIGHTS (proto_send_fd) */
extern const struct proto_field proto_job_shell[];
#define PROTO_SHELL_SIZE_MAX 1000 /* columns and rows of a terminal */
/* the log files of jobs whose rows are gone: job_ids, each >= 0 */
extern const struct proto_field proto_job_logs_remove[];
#define PROTO_JOB_LOGS_MAX 256
/* processes of one sandbox to end (a share over its GPU memory budget): user, one of
 * runtime_id (0: the user's runtime) and pool_id, and the host pids; the ok reply
 * carries "ended", how many of them root found in that sandbox and SIGKILLed */
extern const struct proto_field proto_gpu_processes_end[];
#define PROTO_PIDS_MAX 64
/* job sandboxes: events */
extern const struct proto_field proto_pool_ready[];
extern const struct proto_field proto_pool_ended[];
extern const struct proto_field proto_job_phase[];
extern const struct proto_field proto_job_exited[];
extern const struct proto_field proto_job_sample[];

#define PROTO_JOB_SPEC_MAX (48 * 1024) /* bytes of job_run's spec text */
#define PROTO_GRACE_MAX_S 86400        /* job_stop's grace_s */
#define PROTO_FAILURE_MAX 1024         /* job_exited's failure: the first KiB */
/* job_phase's phase, in order */
#define PROTO_PHASES "downloading training uploading"
/* job_exited's kind (backend.h says what each means) */
#define PROTO_EXIT_KINDS "exited signaled oom max_runtime stopped stage_failed"
/* Whether phase / kind is one of the words above (the reader checks beyond
 * proto_check's bounds). */
bool proto_phase_ok(const char *phase);
bool proto_exit_kind_ok(const char *kind);

/* Why a sandbox ended (sandbox_ended's "cause"). */
#define PROTO_CAUSES "requested time_limit oom exited signaled start_failed gone"

/* Sends msg (not consumed) as one message. 0 or a negative errno. */
int proto_send(int fd, json_t *msg);
/* Receives one message without waiting. 0 with *out owned by the caller, 1 on
 * orderly EOF, -EAGAIN when nothing is there, -EPROTO for a message that is
 * oversized or not a JSON object, another negative errno on error. */
int proto_recv(int fd, json_t **out);

/* proto_send with pass_fd (borrowed; -1: none) as SCM_RIGHTS beside the message. */
int proto_send_fd(int fd, json_t *msg, int pass_fd);
/* proto_recv that also takes a descriptor sent beside the message: *got_fd is it
 * (close-on-exec, the caller's) or -1. More than one, or one beside a message that
 * is refused, is closed here. */
int proto_recv_fd(int fd, json_t **out, int *got_fd);

/* Checks the envelope (version; id when want_id) and that msg's other fields
 * are exactly those of fields, each of its kind and in bounds. 0, or -EPROTO
 * with the reason in err. */
int proto_check(json_t *msg, const struct proto_field *fields, bool want_id, char *err,
		size_t errlen);

/* New messages; the caller owns them. id < 0 leaves the id out (events). */
json_t *proto_msg(const char *type, long long id);
json_t *proto_ok(long long id);
json_t *proto_error(long long id, const char *code, const char *message);

/* Field readers for a checked message (the value is known to be there and
 * of the right kind, except optional ones: "" / 0 / false when absent). */
const char *proto_str(json_t *msg, const char *name);
long long proto_int(json_t *msg, const char *name);
bool proto_bool(json_t *msg, const char *name);

#endif
