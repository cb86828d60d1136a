/* startcheck.h - what a runtime start (sandboxes.c) and a job pool start
 * (pools.c) check alike: the plan's image and the GPUs asked for. */
#ifndef LABD_STARTCHECK_H
#define LABD_STARTCHECK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "config/images.h"
#include "supervisor/launch.h"

/* Whether g is one of [gpu] devices. */
bool startcheck_gpu_configured(const struct labd_config *cfg, long long g);
/* The plan's image NAME (msg's optional "image"; absent: [runtime] image) mapped to a
 * folder by root's own [images], never a path from the web process, into rq->root;
 * hash gets its labd-image.json hash ("" for [runtime] image). -ENOENT with why
 * ("image_missing: ...") when the image is not there, -EPERM ("image_unsafe: ...")
 * when its folder is not root's alone (images_folder_unsafe). */
int startcheck_image(const struct labd_config *cfg, json_t *msg, struct launch_request *rq,
		     char hash[IMAGE_HASH_MAX], char *why, size_t len);

#endif
