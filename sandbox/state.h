/* state.h - the state file that records what one sandbox holds on the host.
 *
 * One file per sandbox, <state_dir>/sandboxes/<id>.state, "key=value" lines, written
 * atomically (temp file + rename).  It is what sandbox_gc() and sandbox_adopt() read
 * after a crash, so every host resource is recorded before it is taken.
 */
#ifndef LABD_SANDBOX_STATE_H
#define LABD_SANDBOX_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "labd/sandbox.h"

struct sandbox_state {
	char id[SANDBOX_ID_MAX];
	char user[64];
	pid_t pid;           /* 0 until the init runs */
	uint64_t start_time_ticks; /* of pid, /proc/<pid>/stat field 22; file key "start_time" */
	char home_image[SANDBOX_PATH_MAX]; /* "" when no home */
	/* the folder under <state_dir>/homes/ of its home's mount (home.h): the user's id;
	 * a state file without it (the release before) mounted it by user name */
	char home_key[64];
	char run_dir[SANDBOX_PATH_MAX];    /* "" when none */
	bool scratch_home; /* a tmpfs home (homescratch.h), with no home_image; file key
			    * "scratch_home=1", absent when false */
	char cgroup_parent[256];
};

/* Serialises st into buf (NUL-terminated); returns the length or -1 if it does not fit. */
int sandbox_state_format(const struct sandbox_state *st, char *buf, size_t size);
/* Parses text (len bytes, need not be NUL-terminated) into *st; unknown keys are
 * errors, every value is length- and range-checked.  0 or -1. */
int sandbox_state_parse(const char *text, size_t len, struct sandbox_state *st);
/* Writes <state_dir>/sandboxes/<id>.state atomically (rename; mode 0600), not synced
 * to disk (state.c says why); 0 or -1. */
int sandbox_state_save(const char *state_dir, const struct sandbox_state *st);
/* From now on this process refuses state files whose home_image or run_dir
 * lies outside the state dir they are in (labd's supervisor, which puts
 * everything there; labbox run may take a --run-dir anywhere), a home_image
 * under images_dir excepted ([storage] home_images: shared storage; "" = none). */
void sandbox_state_confine(const char *images_dir);
/* Reads the state file at path (at most 64 KiB; once confined, it must be
 * <state_dir>/sandboxes/<file> and name no path outside that state dir).
 * 0 or -1 (logged). */
int sandbox_state_load(const char *path, struct sandbox_state *st);
/* Whether path lies below state_dir: it as a prefix, then only components
 * that are not empty, "." or "..". */
bool sandbox_state_path_under(const char *state_dir, const char *path);
/* Builds the state file path into buf; 0 or -1 if it does not fit. */
int sandbox_state_path(const char *state_dir, const char *id, char *buf, size_t size);
/* Reads field 22 (starttime) of /proc/<pid>/stat; 0 if the process is gone or a zombie. */
uint64_t sandbox_proc_start_ticks(pid_t pid);
/* Whether the init st records is still that process (pid and start time match). */
bool sandbox_state_alive(const struct sandbox_state *st);

#endif
