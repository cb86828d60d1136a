/* backend.h - the seam between labd-web and whatever runs sandboxes.
 *
 * Folder rule: backend/ includes proto/, config/ and common/ only; the
 * runtime layer (runtime/) is its one caller.
 *
 * The local backend (local.c) speaks the supervisor protocol; a later Slurm
 * backend submits the same sandboxes as jobs on compute nodes. So that it
 * can, everything here is asynchronous: a start returns once the backend took
 * the request, and what happens next arrives as events, possibly much later
 * (a queued Slurm job); the endpoint a runtime is reached at is known only
 * once it runs ("unix:PATH" relative to the state dir today, "tcp:HOST:PORT"
 * for remote backends) and is stored with the runtime row. */
#ifndef LABD_BACKEND_H
#define LABD_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BACKEND_ENDPOINT_MAX 200
#define BACKEND_REASON_MAX 200

struct backend;

/* Called from the backend's own thread; they must not call back into the
 * backend (queue the work instead). Strings are borrowed for the call. */
struct backend_events {
	/* the channel is (re)established: reconcile with backend_list */
	void (*connected)(void *ctx);
	void (*ready)(void *ctx, const char *user, int64_t runtime_id, const char *endpoint);
	/* cause: one of proto.h's PROTO_CAUSES */
	void (*ended)(void *ctx, const char *user, int64_t runtime_id, const char *cause,
		      bool failed, const char *reason);
	void (*warning)(void *ctx, const char *user, int64_t runtime_id, int64_t seconds_left);
	void *ctx;
};

struct backend_start {
	const char *user;
	int64_t user_id, runtime_id;
	const char *kind; /* "cpu" or "gpu" */
	const char *token;
	int64_t deadline_s;
	/* from the user's plan; 0 = the backend's configured default. The
	 * supervisor caps each at the machine's configured maximum. */
	int64_t memory_bytes, cpus_milli, home_size_bytes;
	bool network;               /* egress; false = loopback only */
	int64_t egress_bytes_per_s; /* each way, 0 = no limit */
	unsigned gpus[16];
	unsigned n_gpus;
	const char *image; /* an [images] name; "" or NULL = the host's root */
	/* out: the image's content hash the backend started it on ("" for the host's
	 * root), BACKEND_IMAGE_HASH_MAX bytes; NULL when the caller does not want it */
	char *image_hash;
};
#define BACKEND_IMAGE_HASH_MAX 80

/* One sandbox as the backend sees it. */
struct backend_sandbox {
	char user[33];
	int64_t runtime_id;
	char state[12]; /* starting, running, stopping, ended */
	bool ready, failed;
	char cause[16];
	char reason[BACKEND_REASON_MAX];
};

/* A user's home as the backend sees it (storage quota). */
struct backend_home {
	bool exists;  /* false: made at the first start */
	bool mounted; /* a runtime holds it now */
	int64_t used_bytes, size_bytes;
};

/* How a new home size was applied. */
enum backend_home_applied {
	BACKEND_HOME_ONLINE,     /* growing now, while mounted */
	BACKEND_HOME_NEXT_START, /* grown (or made) at the next start */
	BACKEND_HOME_UNCHANGED,  /* at or below the image's size: images never shrink */
};

struct backend_ops {
	int (*start)(struct backend *b, const struct backend_start *s, char *endpoint,
		     char *err, size_t errlen);
	int (*stop)(struct backend *b, const char *user, int64_t runtime_id, const char *reason);
	int (*list)(struct backend *b, struct backend_sandbox **out, size_t *n);
	int (*ping)(struct backend *b);
	void (*free)(struct backend *b);
	int (*user_deleted)(struct backend *b, const char *user, int64_t user_id);
	const char *(*warnings)(struct backend *b); /* may be NULL */
	int (*home_usage)(struct backend *b, const char *user, int64_t user_id,
			  struct backend_home *out);
	int (*home_resize)(struct backend *b, const char *user, int64_t user_id, int64_t size_bytes,
			   enum backend_home_applied *applied);
};

struct backend {
	const struct backend_ops *ops;
};

/* Asks for a sandbox. 0 when the backend took it (endpoint[BACKEND_ENDPOINT_MAX]
 * filled when already known); -EEXIST when the user still has one; -EBUSY when a
 * GPU asked for is still held (a teardown not finished); -ETIMEDOUT
 * when the backend did not answer (the start may still happen: reconcile);
 * another negative errno with a message in err. */
int backend_start(struct backend *b, const struct backend_start *s, char *endpoint, char *err,
		  size_t errlen);
/* Asks the sandbox of runtime_id (0: whichever the user has) to stop; its end
 * arrives as an event. 0, -ENOENT when there is none, -ETIMEDOUT. */
int backend_stop(struct backend *b, const char *user, int64_t runtime_id, const char *reason);
/* Every sandbox the backend holds; *out is freed by the caller (free()). */
int backend_list(struct backend *b, struct backend_sandbox **out, size_t *n);
/* 0 when the backend answers. */
int backend_ping(struct backend *b);
/* The user is deleted: the backend stops their sandbox, retires their uid and
 * archives or removes their home. 0, or a negative errno. */
int backend_user_deleted(struct backend *b, const char *user, int64_t user_id);
/* The user's home: used and image size. 0, -ENOSYS (a backend without
 * homes), or a negative errno. */
int backend_home_usage(struct backend *b, const char *user, int64_t user_id,
		       struct backend_home *out);
/* Grows the user's home to size_bytes (capped root-side) now or at its next
 * start; *applied says which. 0, -ENOSYS, or a negative errno. */
int backend_home_resize(struct backend *b, const char *user, int64_t user_id, int64_t size_bytes,
			enum backend_home_applied *applied);
#define BACKEND_WARNINGS_MAX 1024
/* What the backend's host lacks for its limits (cgroup controllers), one sentence a
 * line, "" when nothing; borrowed, valid as long as b. */
const char *backend_warnings(struct backend *b);
void backend_free(struct backend *b);

/* Failure injection for tests: sends text to the supervisor as it is, as a
 * compromised web process could. 0 or a negative errno. */
int backend_local_send_raw(struct backend *b, const char *text);

/* The local backend: takes fd (the supervisor socketpair), says hello and
 * delivers events to ev (copied) from its reader thread. NULL on failure. */
struct backend *backend_local_new(int fd, const struct backend_events *ev);

#endif
