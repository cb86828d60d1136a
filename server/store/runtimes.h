/* runtimes.h - interactive runtime rows: one live (queued, starting, running
 * or stopping) runtime per user, its Jupyter token, GPUs, deadline and
 * activity. A queued row waits for a GPU (store/gpu_queue.h). */
#ifndef LABD_RUNTIMES_H
#define LABD_RUNTIMES_H

#include <stdbool.h>
#include <stdint.h>

struct db;

enum runtime_kind { RUNTIME_CPU, RUNTIME_GPU };
enum runtime_state {
	RUNTIME_STARTING,
	RUNTIME_RUNNING,
	RUNTIME_STOPPING,
	RUNTIME_STOPPED,
	RUNTIME_FAILED,
	RUNTIME_QUEUED, /* waiting for a GPU; last so the older states keep their numbers */
};
#define RUNTIME_STATES 6

#define RUNTIME_TOKEN_LEN 43
/* The device ids a row holds as text, "0,65544": room for a sandbox's most
 * (BOX_GPUS_MAX, 16) of the longest ids (6 digits, labd/gpudev.h) with their
 * commas; 64 bytes cut a sandbox of 16 MIG instances short. */
#define RUNTIME_GPUS_MAX 128
#define RUNTIME_REASON_MAX 160
#define RUNTIME_ENDPOINT_MAX 200
#define RUNTIME_IMAGE_MAX 80 /* an image name or "sha256:" + 64 hex digits */
#define RUNTIME_TOUCH_INTERVAL_S 1 /* seconds between activity writes */

struct runtime {
	int64_t id;
	int64_t user_id;
	char user_name[33];
	enum runtime_kind kind;
	enum runtime_state state;
	char reason[RUNTIME_REASON_MAX];
	char token[RUNTIME_TOKEN_LEN + 1];
	char gpus[RUNTIME_GPUS_MAX];
	char endpoint[RUNTIME_ENDPOINT_MAX]; /* "unix:PATH" or "tcp:HOST:PORT"; "" until known */
	int64_t created_at, ready_at, deadline, ended_at, last_activity;
	/* while queued (else 0): its gpu_queue entry, the position and the
	 * estimated start last computed (estimate 0: none) */
	int64_t queued_at, queue_expires_at, queue_estimate_at;
	int queue_position;
	char image[RUNTIME_IMAGE_MAX];      /* [images] name it ran on; "" = the host's root */
	char image_hash[RUNTIME_IMAGE_MAX]; /* "sha256:..." from its labd-image.json, or "" */
	char gpu_kind[16]; /* the kind of GPU device it waits for or holds (schema 20) */
};

const char *runtimes_kind_name(enum runtime_kind k);
int runtimes_kind_parse(const char *text, enum runtime_kind *out);
const char *runtimes_state_name(enum runtime_state s);
/* True for queued, starting, running and stopping. */
bool runtimes_state_live(enum runtime_state s);

/* Inserts a starting runtime. 0, DB_CONFLICT when the user already has a live one, -1. */
int runtimes_create(struct db *db, int64_t user_id, enum runtime_kind kind, const char *token,
		    const char *gpus, int64_t now, int64_t deadline, struct runtime *out);
/* The user's live runtime (1), none (0), or -1. */
int runtimes_live(struct db *db, int64_t user_id, struct runtime *out);
/* The user's newest runtime of any state (1), none (0), or -1. */
int runtimes_latest(struct db *db, int64_t user_id, struct runtime *out);
/* The runtime with this id, any state (1), none (0), or -1. */
int runtimes_find(struct db *db, int64_t id, struct runtime *out);
/* The live runtime of the user named name (1), none (0), or -1. */
int runtimes_live_by_name(struct db *db, const char *name, struct runtime *out);
/* Moves a runtime to state; reason NULL keeps the old one. Ending states set
 * ended_at, running sets ready_at. Returns 1 changed, 0 not found/not live, -1. */
int runtimes_set_state(struct db *db, int64_t id, enum runtime_state state, const char *reason,
		       int64_t now);
/* Records where the runtime is reached. 0 or -1. */
int runtimes_set_endpoint(struct db *db, int64_t id, const char *endpoint);
/* Records the image the runtime runs on and its hash (from the backend). 0 or -1. */
int runtimes_set_image(struct db *db, int64_t id, const char *image, const char *image_hash);
/* Records activity (rate-limited writes like sessions). */
int runtimes_touch(struct db *db, int64_t id, int64_t now);
/* Calls fn for each live runtime. */
int runtimes_each_live(struct db *db, int (*fn)(const struct runtime *r, void *ctx), void *ctx);

#endif
