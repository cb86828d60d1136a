/* startcheck.c - checks a runtime start and a pool start share; see startcheck.h. */
#include "supervisor/startcheck.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config/images.h"
#include "proto/proto.h"

bool startcheck_gpu_configured(const struct labd_config *cfg, long long g)
{
	for (unsigned i = 0; i < cfg->n_gpu_devices; i++)
		if ((long long)cfg->gpu_devices[i] == g)
			return true;
	return false;
}

int startcheck_image(const struct labd_config *cfg, json_t *msg, struct launch_request *rq,
		     char hash[IMAGE_HASH_MAX], char *why, size_t len)
{
	const char *name = json_object_get(msg, "image") ? proto_str(msg, "image") : "";
	const char *folder = name[0] ? images_folder(cfg, name) : NULL, *unsafe;
	struct image_meta meta;

	hash[0] = '\0';
	rq->from_image = name[0] != '\0';
	snprintf(rq->root, sizeof(rq->root), "%s", folder ? folder : cfg->image);
	if (!rq->from_image)
		return 0;
	if (!folder) {
		snprintf(why, len, "image_missing: no image \"%s\" in the supervisor's [images]", name);
		return -ENOENT;
	}
	if (images_read_meta(folder, &meta) < 0) {
		snprintf(why, len, "image_missing: image \"%s\" (%.120s) has no readable "
			 "labd-image.json", name, folder);
		return -ENOENT;
	}
	if ((unsafe = images_folder_unsafe(folder))) {
		snprintf(why, len, "image_unsafe: image \"%s\" (%.120s) %s", name, folder, unsafe);
		return -EPERM;
	}
	snprintf(hash, IMAGE_HASH_MAX, "%s", meta.hash);
	return 0;
}

