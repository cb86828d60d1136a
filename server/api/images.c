/* images.c - GET /api/v1/images: the runtime images of [images] (docs/api.md), for any
 * logged-in user (scope runtimes: what a runtime may run on). Each shows its name, whether
 * it is usable (its labd-image.json readable, its folder root's alone), and what its
 * labd-image.json says (hash, size, build time, versions);
 * admins also see its folder. Read at each request: a rebuilt image shows its new hash. */
#include <stdbool.h>

#include "api/api.h"
#include "config/config.h"
#include "config/images.h"
#include "http/http.h"
#include "labd/app.h"

/* A string, or null when labd-image.json lacks it. */
static json_t *text_or_null(const char *s)
{
	return s[0] ? json_string(s) : json_null();
}

static json_t *image_json(const struct config_image *im, bool admin)
{
	struct image_meta m;
	/* what the supervisor checks at a start (startcheck.c), so the list never promises more */
	bool usable = images_read_meta(im->folder, &m) == 0 && !images_folder_unsafe(im->folder);
	json_t *j;

	if (!usable) /* reported, never guessed: a start on it fails with image_missing */
		j = json_pack("{s:s,s:b}", "name", im->name, "usable", 0);
	else
		j = json_pack("{s:s,s:b,s:s,s:o,s:o,s:o,s:o,s:o,s:o}", "name", im->name, "usable", 1,
			      "hash", m.hash, "size_bytes",
			      m.size_bytes >= 0 ? json_integer(m.size_bytes) : json_null(),
			      "built_at", text_or_null(m.built_at), "debian", text_or_null(m.debian),
			      "python", text_or_null(m.python), "jupyterlab",
			      text_or_null(m.jupyterlab), "torch", text_or_null(m.torch));
	if (j && admin) /* where to look when it is missing */
		json_object_set_new(j, "folder", json_string(im->folder));
	return j;
}

void api_images_list(struct http_request *req)
{
	const struct labd_config *cfg = http_app(req)->cfg;
	bool admin = http_identity(req)->user.role == USER_ROLE_ADMIN;
	json_t *list = json_array(), *one;

	for (unsigned i = 0; list && i < cfg->n_images; i++) {
		if (!(one = image_json(&cfg->images[i], admin)) || json_array_append_new(list, one) < 0) {
			json_decref(list);
			list = NULL;
		}
	}
	if (!list) {
		http_reply_internal(req);
		return;
	}
	http_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "images", list));
}
