/* startcheck.h - the one check of a sandbox start, a runtime's (host_runtime_requests.c,
 * sandbox_start) and a job pool's (host_pool_requests.c, pool_start) alike: the start is read
 * from its checked message into a struct box_shape (labd/boxshape.h), then held
 * against the refusal table below. Each refusal has its own code, decided by the
 * check that failed, never read back out of a message. What only one kind of start
 * knows (a user's one runtime, a pool already running, pools per user) stays with
 * its caller, checked before this. */
#ifndef LABD_STARTCHECK_H
#define LABD_STARTCHECK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "config/images.h"
#include "labd/boxshape.h"
#include "supervisor/launch.h"

/* Why a start is refused, in the order checked; startcheck_code_name gives the
 * reply's "code". */
enum startcheck_code {
	STARTCHECK_OK = 0,
	STARTCHECK_BAD_REQUEST,        /* a runtime's kind is not cpu or gpu, or its GPUs do
					* not match it (gpu: at least one; cpu: none) */
	STARTCHECK_PAST_DEADLINE,      /* the deadline is not in the future */
	STARTCHECK_GPU_NOT_CONFIGURED, /* a GPU device is none of this host's: its card is not
					* one of [gpu] devices, its MIG instance is not in
					* [gpu] caps_dir, its share is past the card's count in
					* [gpu] shares; or a whole card is asked for that is
					* shared or has MIG instances */
	STARTCHECK_GPU_NAMED_TWICE,    /* a GPU device is asked for twice (or with its card) */
	STARTCHECK_GPU_BUSY,           /* a GPU device is held by a live sandbox or pool, or
					* its card is (gpudev_conflict) */
	STARTCHECK_ABOVE_MACHINE_CAP,  /* a size is above [runtime] *_max (sizecap.h) */
	STARTCHECK_IMAGE_MISSING,      /* no such [images] NAME, or no labd-image.json */
	STARTCHECK_IMAGE_UNSAFE,       /* the image's folder is not root's alone */
	STARTCHECK_EGRESS_TOOLS_MISSING, /* an egress start, and [network] nft or pasta is
					  * not an executable file on this host */
	STARTCHECK_HOST_FULL,          /* the host runs capacity_max_sandboxes() already */
};

/* A start as its message says it (strings borrowed from the message). */
struct startcheck_start {
	const char *kind; /* sandbox_start's "cpu" or "gpu"; NULL for a pool */
	int64_t deadline_s;
	struct box_shape shape;
	/* the message's gpu_uuids, parallel to shape.gpus; n_gpu_uuids 0 when absent */
	const char *gpu_uuids[BOX_GPUS_MAX];
	unsigned n_gpu_uuids;
	int live; /* the host's live sandboxes (host_live), set by the caller after the read */
};

/* Whether gpu (a device id) conflicts with one held now by any sandbox or pool
 * (gpudev_conflict); ctx is the caller's. */
typedef bool (*startcheck_held_fn)(const void *ctx, unsigned gpu);

/* The reply's code for c: "past_deadline", "gpu_busy", ... (static text). */
const char *startcheck_code_name(enum startcheck_code c);

/* Reads msg, already checked by proto_check against proto_sandbox_start or
 * proto_pool_start, into *out. An absent size stays 0 (the default, applied by
 * the check); an absent network is [quota] network and egress_rate together. */
void startcheck_read(const struct labd_config *cfg, json_t *msg, struct startcheck_start *out);

/* Whether a refusal with code c is an expected outcome rather than a fault: a GPU
 * freed and claimed in the same instant (the web side saw its holder end before the
 * teardown did, and asks again), logged as info; every other refusal means the two
 * sides disagree on a rule and stays an error. */
bool startcheck_expected(enum startcheck_code c);

/* Checks st in the order of enum startcheck_code, with held telling which GPUs are
 * taken. STARTCHECK_OK with rq->sizes (defaults applied), rq->root and
 * rq->from_image set from the shape, and hash the image's labd-image.json hash
 * ("" for [runtime] image); else the code, with a sentence in why (image refusals
 * start with the code's name: the web process reads "image_missing" from it). */
enum startcheck_code startcheck_check(const struct labd_config *cfg,
				      const struct startcheck_start *st, startcheck_held_fn held,
				      const void *ctx, struct launch_request *rq,
				      char hash[IMAGE_HASH_MAX], char *why, size_t len);

/* The first of [network] nft and pasta that is not an executable file (the path as
 * configured), or NULL when both are there: an egress start needs both. */
const char *startcheck_egress_missing(const struct labd_config *cfg);

/* Copies the start's GPUs (and their uuids), network and egress rate into rq
 * (fill_request, both kinds of start). */
void startcheck_fill(const struct startcheck_start *st, struct launch_request *rq);

#endif
