/* host_runtime_box.h - a runtime as the host holds it, shared by host_runtime.c (its
 * lifecycle) and host_runtime_adopt.c (its record and adoption). Internal to
 * supervisor/. */
#ifndef LABD_HOST_RUNTIME_BOX_H
#define LABD_HOST_RUNTIME_BOX_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

#include "supervisor/host.h"

struct runtime_box {
	struct host_box b;
	char kind[8];
	long long runtime_id;
	long long probe_at_ms;
	unsigned warned; /* bit i: warn_before[i] was sent */
	int out_fd;      /* Jupyter's output pipe, held until its keeper has it */
	pid_t keeper;    /* the keeper's pid (runkeeper.h); 0 when none */
};

/* host_runtime_adopt.c, for the purpose's table */
void host_runtime_describe(const struct host_box *b, char *out, size_t len);
void host_runtime_identify(const struct host_box *b, json_t *obj);
void host_runtime_record_path(const struct host *h, const struct host_box *b, char *out,
			      size_t len);
void host_runtime_record_fields(const struct host_box *b, json_t *rec);
void host_runtime_list_entry(const struct host_box *b, json_t *entry);
void host_runtime_adopt_all(struct host *h);
void host_runtime_log_warnings(void);

#endif
