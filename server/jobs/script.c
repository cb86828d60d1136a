/* script.c - a job's script as its launcher's arguments; see script.h. */
#include "jobs/script.h"

#include <string.h>

#include "jobs/submit.h"

/* Joins its arguments into the file, then runs it: by the "#!" line's interpreter and
 * its words (read here, so a home mounted noexec still runs it), a CR a Windows
 * paste left at its end dropped; without one by /bin/sh. No glob in the split words. */
static const char launcher[] =
	"f=" JOBS_SCRIPT_PATH "; printf %s \"$@\" > \"$f\" || exit 126; "
	"IFS= read -r l < \"$f\"; cr=$(printf '\\r'); l=${l%\"$cr\"}; "
	"case $l in '#!'*) set -f; set -- ${l#??}; set +f; exec \"$@\" \"$f\";; esac; "
	"exec /bin/sh \"$f\"";

json_t *jobs_script_command(void)
{
	return json_pack("[s,s,s,s]", "/bin/sh", "-c", launcher, "labd-script");
}

/* The length of the piece at s (n bytes left): at most JOBS_ARG_MAX_BYTES, never
 * ending inside a UTF-8 sequence (a JSON string must stay valid UTF-8). */
static size_t piece_len(const char *s, size_t n)
{
	size_t k = n < JOBS_ARG_MAX_BYTES ? n : JOBS_ARG_MAX_BYTES;

	while (k < n && k > 0 && ((unsigned char)s[k] & 0xc0) == 0x80)
		k--;
	return k;
}

json_t *jobs_script_argv(json_t *command, const char *script)
{
	json_t *argv = json_copy(command);
	size_t n = strlen(script);

	for (size_t at = 0; argv && at < n;) {
		size_t k = piece_len(script + at, n - at);
		if (k == 0 || json_array_append_new(argv, json_stringn(script + at, k)) < 0) {
			json_decref(argv);
			return NULL;
		}
		at += k;
	}
	return argv;
}
