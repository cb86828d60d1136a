/* script.h - a job given as a script (docs/jobs.md "A script instead of a command"):
 * multi-line text, saved in the job's output folder as /opt/ml/output/script and run
 * there by the interpreter its "#!" line names, else /bin/sh.
 *
 * No part of labd below the web process learns a new field: the script travels as
 * arguments of a fixed /bin/sh launcher (its command), cut into pieces the job
 * runner's argument bound allows, which the launcher joins back into the file. So
 * root checks it as it checks any command. */
#ifndef LABD_JOBS_SCRIPT_H
#define LABD_JOBS_SCRIPT_H

#include <jansson.h>

/* The longest script (bytes): its pieces and the launcher fit a job spec
 * (PROTO_JOB_SPEC_MAX) beside the other fields. */
#define JOBS_SCRIPT_MAX_BYTES (32 * 1024)
/* Where the launcher saves it, inside the sandbox (<home>/<output_path>/output). */
#define JOBS_SCRIPT_PATH "/opt/ml/output/script"

/* The launcher's command, the job's "command" for a script job (a new array). */
json_t *jobs_script_command(void);
/* The argv the job runner gets: command, then the script cut into pieces of at most
 * JOBS_ARG_MAX_BYTES at UTF-8 boundaries (a new array; NULL on allocation failure). */
json_t *jobs_script_argv(json_t *command, const char *script);

#endif
