/* images.c - [images] and labd-image.json; see images.h. */
#include "config/images.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "labd/log.h"

bool images_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > IMAGE_NAME_MAX || !((name[0] >= 'a' && name[0] <= 'z') ||
					      (name[0] >= '0' && name[0] <= '9')))
		return false;
	return strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

const char *images_add(struct labd_config *cfg, const char *name, const char *value)
{
	struct config_image *im;

	if (!images_name_ok(name))
		return "an image name is [a-z0-9][a-z0-9_-]*, at most 32 bytes";
	if (value[0] != '/' || strlen(value) >= sizeof(im->folder))
		return "an image folder must be an absolute path";
	if (images_folder(cfg, name))
		return "image named twice";
	if (cfg->n_images >= CONFIG_MAX_IMAGES)
		return "too many images";
	im = &cfg->images[cfg->n_images++];
	snprintf(im->name, sizeof(im->name), "%s", name);
	snprintf(im->folder, sizeof(im->folder), "%s", value);
	return NULL;
}

const char *images_folder(const struct labd_config *cfg, const char *name)
{
	for (unsigned i = 0; i < cfg->n_images; i++)
		if (strcmp(cfg->images[i].name, name) == 0)
			return cfg->images[i].folder;
	return NULL;
}

static void copy_str(json_t *root, const char *key, char *out, size_t len)
{
	const char *v = json_string_value(json_object_get(root, key));
	snprintf(out, len, "%s", v ? v : "");
}

int images_read_meta(const char *folder, struct image_meta *out)
{
	char path[CONFIG_PATH_MAX + 32];
	json_error_t jerr;
	json_t *root, *size;

	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "%s/labd-image.json", folder);
	if (access(path, R_OK) < 0)
		return -ENOENT;
	if (!(root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr)))
		return -EINVAL;
	copy_str(root, "hash", out->hash, sizeof(out->hash));
	copy_str(root, "built_at", out->built_at, sizeof(out->built_at));
	copy_str(root, "debian", out->debian, sizeof(out->debian));
	copy_str(root, "python", out->python, sizeof(out->python));
	copy_str(root, "jupyterlab", out->jupyterlab, sizeof(out->jupyterlab));
	copy_str(root, "torch", out->torch, sizeof(out->torch));
	size = json_object_get(root, "size_bytes");
	out->size_bytes = json_is_integer(size) ? json_integer_value(size) : -1;
	json_decref(root);
	return strncmp(out->hash, "sha256:", 7) == 0 ? 0 : -EINVAL;
}

const char *images_folder_unsafe(const char *folder)
{
	struct stat st;

	if (stat(folder, &st) < 0 || !S_ISDIR(st.st_mode))
		return "is not a directory";
	if (st.st_uid != 0)
		return "is not owned by root";
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return "is writable by its group or others";
	return NULL;
}

void images_log_missing(const struct labd_config *cfg)
{
	struct image_meta m;

	for (unsigned i = 0; i < cfg->n_images; i++) {
		int rc = images_read_meta(cfg->images[i].folder, &m);
		if (rc < 0)
			log_error("[images] %s: %s/labd-image.json %s: the image is unusable and a "
				  "start on it fails (image_missing)",
				  cfg->images[i].name, cfg->images[i].folder,
				  rc == -ENOENT ? "is missing" : "is unreadable or has no hash");
	}
}
