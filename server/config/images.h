/* images.h - the [images] section: runtime image names and their folders, and the
 * labd-image.json each folder holds (written by deploy/image/build; docs/operations.md).
 *
 * Root-side: the supervisor maps a plan's image NAME to its folder with these (never a
 * path from the web process); the web process lists them in GET /api/v1/images. */
#ifndef LABD_CONFIG_IMAGES_H
#define LABD_CONFIG_IMAGES_H

#include <stdbool.h>
#include <stdint.h>

struct labd_config;

#define IMAGE_NAME_MAX 32 /* [a-z0-9][a-z0-9_-]*, as deploy/image/build --name */
#define IMAGE_HASH_MAX 80 /* "sha256:" + 64 hex digits */
#define IMAGE_VERSION_MAX 32

/* What labd-image.json says about an image (strings "" when the file lacks them). */
struct image_meta {
	char hash[IMAGE_HASH_MAX];
	char built_at[IMAGE_VERSION_MAX];
	char debian[IMAGE_VERSION_MAX];
	char python[IMAGE_VERSION_MAX];
	char jupyterlab[IMAGE_VERSION_MAX];
	char torch[IMAGE_VERSION_MAX];
	int64_t size_bytes; /* apparent size at build time; -1 when unknown */
};

/* Whether name is a valid image name. */
bool images_name_ok(const char *name);
/* Adds [images] name = value to cfg: NULL, or why it is refused (static text). */
const char *images_add(struct labd_config *cfg, const char *name, const char *value);
/* The folder of the image called name, or NULL when [images] has none (borrowed from cfg). */
const char *images_folder(const struct labd_config *cfg, const char *name);
/* Reads <folder>/labd-image.json. 0, or -ENOENT when the folder or file is missing,
 * -EINVAL when it is unreadable or has no hash. */
int images_read_meta(const char *folder, struct image_meta *out);
/* Whether folder may serve as a sandbox's root: a directory owned by root that neither its
 * group nor others may write (else whoever may write it chooses what every runtime on the
 * image runs). NULL, or why not (static text). */
const char *images_folder_unsafe(const char *folder);
/* Logs each configured image whose folder or labd-image.json is missing (start-up):
 * such an image stays configured, and a start on it fails with image_missing. */
void images_log_missing(const struct labd_config *cfg);

#endif
