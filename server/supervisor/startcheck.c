/* startcheck.c - the start check of runtimes and job pools; see startcheck.h. */
#include "supervisor/startcheck.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/capacity.h"
#include "config/images.h"
#include "labd/gpucaps.h"
#include "labd/gpudev.h"
#include "labd/sandbox.h"
#include "proto/proto.h"
#include "supervisor/sizecap.h"

_Static_assert(BOX_GPUS_MAX == SANDBOX_MAX_GPUS, "a shape's GPUs must fit a sandbox spec");

static const char *const code_names[] = {
	[STARTCHECK_OK] = "ok",
	[STARTCHECK_BAD_REQUEST] = "bad_request",
	[STARTCHECK_PAST_DEADLINE] = "past_deadline",
	[STARTCHECK_GPU_NOT_CONFIGURED] = "gpu_not_configured",
	[STARTCHECK_GPU_NAMED_TWICE] = "gpu_named_twice",
	[STARTCHECK_GPU_BUSY] = "gpu_busy",
	[STARTCHECK_ABOVE_MACHINE_CAP] = "above_machine_cap",
	[STARTCHECK_IMAGE_MISSING] = "image_missing",
	[STARTCHECK_IMAGE_UNSAFE] = "image_unsafe",
	[STARTCHECK_EGRESS_TOOLS_MISSING] = "egress_tools_missing",
	[STARTCHECK_HOST_FULL] = "host_full",
};

const char *startcheck_code_name(enum startcheck_code c)
{
	if ((unsigned)c >= sizeof(code_names) / sizeof(code_names[0]))
		return "bad_request";
	return code_names[c];
}

bool startcheck_expected(enum startcheck_code c)
{
	return c == STARTCHECK_GPU_BUSY;
}

/* An optional integer field of a checked message, 0 when absent (proto.c bounded it). */
static int64_t opt_int(json_t *msg, const char *name)
{
	return json_object_get(msg, name) ? proto_int(msg, name) : 0;
}

void startcheck_read(const struct labd_config *cfg, json_t *msg, struct startcheck_start *out)
{
	struct box_shape *sh = &out->shape;
	json_t *g;
	size_t i;

	memset(out, 0, sizeof(*out));
	out->kind = json_object_get(msg, "kind") ? proto_str(msg, "kind") : NULL;
	out->deadline_s = proto_int(msg, "deadline");
	json_array_foreach(json_object_get(msg, "gpus"), i, g) {
		if (sh->n_gpus < BOX_GPUS_MAX) /* proto.c bounds the array to as many */
			sh->gpus[sh->n_gpus++] = (unsigned)json_integer_value(g);
	}
	json_array_foreach(json_object_get(msg, "gpu_uuids"), i, g) {
		if (out->n_gpu_uuids < BOX_GPUS_MAX) /* each a uuid (proto.c) */
			out->gpu_uuids[out->n_gpu_uuids++] = json_string_value(g);
	}
	sh->memory_bytes = opt_int(msg, "memory_bytes");
	sh->cpus_milli = opt_int(msg, "cpus_milli");
	sh->home_size_bytes = opt_int(msg, "home_size_bytes");
	sh->image = json_object_get(msg, "image") ? proto_str(msg, "image") : "";
	/* The network and its rate are one policy, decided here once for runtimes and pools
	 * alike. A message that names the network (every web process since plans carry one)
	 * is the plan's: its absent rate is the plan's "no limit". A message without one (an
	 * older web process) gets [quota] network and egress_rate together: the rate belongs
	 * to the network it was configured with, and a default egress the admin limited must
	 * not come out unlimited because the sender predates the field. */
	if (json_object_get(msg, "network")) {
		sh->network = proto_int(msg, "network") == 1;
		sh->egress_bytes_per_s = opt_int(msg, "egress_bytes_per_s");
	} else {
		sh->network = cfg->quota_network == 1;
		sh->egress_bytes_per_s = json_object_get(msg, "egress_bytes_per_s")
						 ? proto_int(msg, "egress_bytes_per_s")
					 : cfg->quota_egress_bytes_per_s > 0 ? cfg->quota_egress_bytes_per_s
									     : 0;
	}
}

/* c, with why: text, and the GPU device it is about in its text form (%s). */
static enum startcheck_code refuse(enum startcheck_code c, char *why, size_t len,
				   const char *text, unsigned gpu)
{
	char dev[GPUDEV_TEXT_MAX];

	gpudev_format(gpu, dev, sizeof(dev));
	snprintf(why, len, text, dev);
	return c;
}

/* Device id against root's own records: its card in [gpu] devices; a whole card
 * neither shared nor split into MIG instances; a MIG instance's GPU and compute
 * instance both in the driver's capability files; a share below its card's count. */
static enum startcheck_code check_device(const struct labd_config *cfg, unsigned id, char *why,
					 size_t len)
{
	const struct config_gpu_share *share;
	struct gpudev d;
	unsigned cap;

	if (!gpudev_decode(id, &d) || !config_has_gpu(cfg, d.minor))
		return refuse(STARTCHECK_GPU_NOT_CONFIGURED, why, len,
			      "gpu is not one of [gpu] devices (gpu %s)", id);
	share = config_gpu_share(cfg, d.minor);
	switch (d.kind) {
	case GPUDEV_WHOLE:
		if (share)
			return refuse(STARTCHECK_GPU_NOT_CONFIGURED, why, len,
				      "gpu %s is shared ([gpu] shares): ask for a share", id);
		if (gpucaps_mig_used(cfg->gpu_caps_dir, d.minor))
			return refuse(STARTCHECK_GPU_NOT_CONFIGURED, why, len,
				      "gpu %s has MIG on: ask for an instance", id);
		return STARTCHECK_OK;
	case GPUDEV_MIG:
		if (gpucaps_minor(cfg->gpu_caps_dir, d.minor, d.gi, GPUCAPS_CI_NONE, &cap) < 0 ||
		    gpucaps_minor(cfg->gpu_caps_dir, d.minor, d.gi, (int)d.ci, &cap) < 0)
			return refuse(STARTCHECK_GPU_NOT_CONFIGURED, why, len,
				      "no MIG instance %s in [gpu] caps_dir", id);
		return STARTCHECK_OK;
	case GPUDEV_SHARE:
		if (!share || d.share >= share->count)
			return refuse(STARTCHECK_GPU_NOT_CONFIGURED, why, len,
				      "no share %s in [gpu] shares", id);
		return STARTCHECK_OK;
	}
	return refuse(STARTCHECK_GPU_NOT_CONFIGURED, why, len, "gpu %s is no device", id);
}

/* The uuids, when sent: one per device, MIG- for an instance and GPU- for a card. */
static enum startcheck_code check_uuids(const struct startcheck_start *st, char *why, size_t len)
{
	const struct box_shape *sh = &st->shape;

	if (!st->n_gpu_uuids)
		return STARTCHECK_OK;
	if (st->n_gpu_uuids != sh->n_gpus)
		return refuse(STARTCHECK_BAD_REQUEST, why, len,
			      "gpu_uuids must name each of gpus", 0);
	for (unsigned i = 0; i < sh->n_gpus; i++) {
		struct gpudev d;
		const char *want = gpudev_decode(sh->gpus[i], &d) && d.kind == GPUDEV_MIG ? "MIG-"
											 : "GPU-";
		if (strncmp(st->gpu_uuids[i], want, 4) != 0)
			return refuse(STARTCHECK_BAD_REQUEST, why, len,
				      "gpu_uuids: gpu %s's uuid is of another kind", sh->gpus[i]);
	}
	return STARTCHECK_OK;
}

/* The kind against the GPUs (a runtime only), the deadline, then each GPU device. */
static enum startcheck_code check_gpus(const struct labd_config *cfg,
				       const struct startcheck_start *st, startcheck_held_fn held,
				       const void *ctx, char *why, size_t len)
{
	const struct box_shape *sh = &st->shape;
	enum startcheck_code c;

	if (st->kind && strcmp(st->kind, "cpu") && strcmp(st->kind, "gpu"))
		return refuse(STARTCHECK_BAD_REQUEST, why, len, "kind must be cpu or gpu", 0);
	if (st->kind && (strcmp(st->kind, "gpu") == 0) != (sh->n_gpus > 0))
		return refuse(STARTCHECK_BAD_REQUEST, why, len, "gpus do not match the kind", 0);
	if (st->deadline_s <= time(NULL))
		return refuse(STARTCHECK_PAST_DEADLINE, why, len, "deadline is in the past", 0);
	if ((c = check_uuids(st, why, len)) != STARTCHECK_OK)
		return c;
	for (unsigned i = 0; i < sh->n_gpus; i++) {
		if ((c = check_device(cfg, sh->gpus[i], why, len)) != STARTCHECK_OK)
			return c;
		for (unsigned k = 0; k < i; k++)
			if (gpudev_conflict(sh->gpus[k], sh->gpus[i]))
				return refuse(STARTCHECK_GPU_NAMED_TWICE, why, len,
					      "gpu is named twice (gpu %s)", sh->gpus[i]);
		/* exclusivity is root's to keep, whatever the web process believes */
		if (held && held(ctx, sh->gpus[i]))
			return refuse(STARTCHECK_GPU_BUSY, why, len,
				      "gpu is held by another sandbox (gpu %s)", sh->gpus[i]);
	}
	return STARTCHECK_OK;
}

/* The image NAME mapped to a folder by root's own [images], never a path from the
 * web process, into rq->root; absent: [runtime] image. */
static enum startcheck_code check_image(const struct labd_config *cfg, const char *name,
					struct launch_request *rq, char hash[IMAGE_HASH_MAX],
					char *why, size_t len)
{
	const char *folder = name[0] ? images_folder(cfg, name) : NULL, *unsafe;
	struct image_meta meta;

	rq->from_image = name[0] != '\0';
	snprintf(rq->root, sizeof(rq->root), "%s", folder ? folder : cfg->image);
	if (!rq->from_image)
		return STARTCHECK_OK;
	if (!folder) {
		snprintf(why, len, "image_missing: no image \"%s\" in the supervisor's [images]", name);
		return STARTCHECK_IMAGE_MISSING;
	}
	if (images_read_meta(folder, &meta) < 0) {
		snprintf(why, len, "image_missing: image \"%s\" (%.120s) has no readable "
			 "labd-image.json", name, folder);
		return STARTCHECK_IMAGE_MISSING;
	}
	if ((unsafe = images_folder_unsafe(folder))) {
		snprintf(why, len, "image_unsafe: image \"%s\" (%.120s) %s", name, folder, unsafe);
		return STARTCHECK_IMAGE_UNSAFE;
	}
	snprintf(hash, IMAGE_HASH_MAX, "%s", meta.hash);
	return STARTCHECK_OK;
}

const char *startcheck_egress_missing(const struct labd_config *cfg)
{
	if (access(cfg->net_nft, X_OK) < 0)
		return cfg->net_nft;
	if (!cfg->net_path && access(cfg->net_pasta, X_OK) < 0) /* veth needs no pasta */
		return cfg->net_pasta;
	return NULL;
}

/* Refused here, in words, rather than failing deep in the start with the network
 * step's exit status 127 (a host without nftables or passt). */
static enum startcheck_code check_egress(const struct labd_config *cfg, const struct box_shape *sh,
					 char *why, size_t len)
{
	const char *tool = sh->network ? startcheck_egress_missing(cfg) : NULL;

	if (!tool)
		return STARTCHECK_OK;
	snprintf(why, len, "egress_tools_missing: %.60s is not on this host: install %s (or "
		 "set [network] %s), or set [quota] network = none", tool,
		 tool == cfg->net_nft ? "nftables" : "passt",
		 tool == cfg->net_nft ? "nft" : "pasta");
	return STARTCHECK_EGRESS_TOOLS_MISSING;
}

enum startcheck_code startcheck_check(const struct labd_config *cfg,
				      const struct startcheck_start *st, startcheck_held_fn held,
				      const void *ctx, struct launch_request *rq,
				      char hash[IMAGE_HASH_MAX], char *why, size_t len)
{
	const struct box_shape *sh = &st->shape;
	enum startcheck_code c;

	hash[0] = '\0';
	why[0] = '\0';
	if ((c = check_gpus(cfg, st, held, ctx, why, len)) != STARTCHECK_OK)
		return c;
	/* refuse rather than clamp (sizecap.h): the admin sees it in the reason */
	if (sizecap_apply(cfg, sh->memory_bytes, sh->cpus_milli, sh->home_size_bytes, &rq->sizes,
			  why, len) < 0)
		return STARTCHECK_ABOVE_MACHINE_CAP;
	if ((c = check_image(cfg, sh->image ? sh->image : "", rq, hash, why, len)) != STARTCHECK_OK)
		return c;
	if ((c = check_egress(cfg, sh, why, len)) != STARTCHECK_OK)
		return c;
	/* the web process refuses first (runtime.c, dispatch.c); this holds when its
	 * count and the host's differ */
	if (st->live >= 0 && (unsigned)st->live >= capacity_max_sandboxes(cfg)) {
		snprintf(why, len, "host_full: the host runs %d sandboxes, its cap ([runtime] "
			 "max_sandboxes)", st->live);
		return STARTCHECK_HOST_FULL;
	}
	return STARTCHECK_OK;
}

void startcheck_fill(const struct startcheck_start *st, struct launch_request *rq)
{
	const struct box_shape *shape = &st->shape;

	rq->n_gpus = shape->n_gpus < SANDBOX_MAX_GPUS ? shape->n_gpus : SANDBOX_MAX_GPUS;
	memcpy(rq->gpus, shape->gpus, rq->n_gpus * sizeof(rq->gpus[0]));
	for (unsigned i = 0; i < rq->n_gpus; i++)
		snprintf(rq->gpu_uuids[i], sizeof(rq->gpu_uuids[i]), "%s",
			 i < st->n_gpu_uuids ? st->gpu_uuids[i] : "");
	rq->network = shape->network;
	rq->egress_bytes_per_s = shape->egress_bytes_per_s > 0 ? (uint64_t)shape->egress_bytes_per_s
							       : 0;
}
