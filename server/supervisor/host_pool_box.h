/* host_pool_box.h - what host_pool.c (a pool's lifecycle) and host_pool_adopt.c
 * (its record and adoption) share. Internal to supervisor/. */
#ifndef LABD_HOST_POOL_BOX_H
#define LABD_HOST_POOL_BOX_H

#include <jansson.h>
#include <stddef.h>

#include "supervisor/host.h"
#include "supervisor/pool.h"

/* A claimed box's pool fds set to -1 (the host set its own). */
void host_pool_box_init(struct pool_box *p);
void host_pool_close_fd(int *fd);
void host_pool_close_io(struct pool_box *p);

/* host_pool_adopt.c, for the purpose's table */
void host_pool_describe(const struct host_box *b, char *out, size_t len);
void host_pool_identify(const struct host_box *b, json_t *obj);
void host_pool_record_path(const struct host *h, const struct host_box *b, char *out,
			   size_t len);
void host_pool_record_fields(const struct host_box *b, json_t *rec);
void host_pool_list_entry(const struct host_box *b, json_t *entry);
void host_pool_adopt_all(struct host *h);

#endif
