/* gpubudget.h - the share budget watcher: a time-sliced share of a card
 * ([gpu] shares) has a GPU memory budget, but the driver does not enforce
 * one (time-slicing isolates no memory). After every GPU reading
 * (sched/gpus.h) it maps NVML's per-process memory to sandboxes by pid: the
 * process's cgroup (/proc/<pid>/cgroup) is its sandbox's, named
 * "labd/<user>-<12 hex digits>" by libsandbox, so a process belongs to the
 * user whose share of that card holds it. A share whose holder uses more than
 * its budget gets a warning (a notice on the device, the holder's runtime and
 * job page: "GPU memory over the share's budget: …"); still over after
 * [gpu] share_grace, root is asked to end those processes (gpu_processes_end:
 * it kills only pids in that sandbox's cgroup), and the notice says so.
 *
 * Notices live in this process: a restart of labd forgets them (the ended
 * processes stay ended). */
#ifndef LABD_RUNTIME_GPUBUDGET_H
#define LABD_RUNTIME_GPUBUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct app;
struct gpubudget;

#define GPUBUDGET_TEXT_MAX 320

/* Starts watching app->gpus' readings (nothing to watch without shares:
 * then *out is NULL and 0). 0, or a negative errno. */
int gpubudget_start(struct app *app, struct gpubudget **out);
/* Stops the watcher (waits for a pass under way) and frees it. NULL is fine. */
void gpubudget_stop(struct app *app, struct gpubudget *b);
/* The notice of share device id now, into out: whether there is one. */
bool gpubudget_notice(struct gpubudget *b, unsigned id, char *out, size_t len);
/* The notice of what a runtime (runtime_id > 0) or a job (job_id > 0) held,
 * into out: whether there is one. An ended one is kept after the share is let go. */
bool gpubudget_notice_of(struct gpubudget *b, int64_t runtime_id, int64_t job_id, char *out,
			 size_t len);
/* The user whose sandbox a /proc/<pid>/cgroup text names (a component
 * "labd" followed by "<user>-<12 hex digits>") into user[len]: 0, or -ENOENT
 * when it names no sandbox. */
int gpubudget_user_of_cgroup(const char *text, char *user, size_t len);

#endif
