/* homes.h - home images by user id, and what becomes of them when the user goes.
 *
 * A home is <homes dir>/<user id>.img, the homes dir being <state>/homes or
 * [storage] home_images (shared storage: the nodes of a cluster; sandbox/homeguard.h
 * keeps one node at a time on an image), mount points always under <state>: ids are never reused (the store's
 * AUTOINCREMENT), so a new user with an old name never gets the old home.
 * Deleting a user archives the image to <state>/archive/<id>-<name>-<unix
 * time>.img (<home_images>/archive when set) or removes it ([runtime] deleted_home); archives older than
 * archive_retention are removed by a sweep. Everything is fd-relative to the
 * root-only homes/ and archive/ (statedir.h), following no link. */
#ifndef LABD_SUPERVISOR_HOMES_H
#define LABD_SUPERVISOR_HOMES_H

#include <stddef.h>
#include <stdint.h>

struct labd_config;

/* The folder of the home images: [storage] home_images, else <state_dir>/homes. */
void homes_dir(const struct labd_config *cfg, const char *state_dir, char *out, size_t len);
/* <homes dir>/<user_id>.img into out. */
void homes_image_path(const struct labd_config *cfg, const char *state_dir, long long user_id,
		      char *out, size_t len);
/* Before the first start under this layout: moves a home named by user name
 * (homes/<user>.img, the old layout) to homes/<user_id>.img once, so no data
 * is lost. 0 (also when there is nothing to move) or a negative errno. */
int homes_adopt_named(const struct labd_config *cfg, const char *state_dir, const char *user,
		      long long user_id);
/* The user was deleted (their sandbox is gone): archive or remove their
 * image as configured. 0 (also when they had none) or a negative errno. */
int homes_retire(const struct labd_config *cfg, const char *state_dir, const char *user,
		 long long user_id);
/* Removes archived images last changed more than retention_s before now_s.
 * Returns how many were removed, or a negative errno. */
int homes_sweep(const struct labd_config *cfg, const char *state_dir, int64_t retention_s,
		int64_t now_s);

#endif
