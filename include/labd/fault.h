/* fault.h - named fault points, compiled only into the fault build.
 *
 * A fault point marks a step where a crash must leave nothing behind that the
 * next start of labd cannot clean up:
 *     FAULT_POINT("runtime.start.send.before");
 *     FAULT_POINT_STEP("sandbox.start", step_name);   -> "sandbox.start.<step>"
 *     FAULT_POINT_NTH("migration.commit", version);   -> "migration.commit.<n>"
 * In every build but the fault build (make faults: build-faults/, -DLABD_FAULTS)
 * both are ((void)0): their arguments are not evaluated and no fault code is
 * linked (tests/integration/test_faults.py checks the production binary).
 *
 * In the fault build the environment variable LABD_FAULT=<name>[:<action>] is read
 * once per process (forked children inherit what was read). When the point of that
 * name is reached, the process logs "fault point <name>: SIGKILL to <action>" and
 * dies: action "self" (the default) kills the calling process only, "group" its
 * whole process group (labd's supervisor, web process and workers; the keepers and
 * sandboxes have their own sessions and live on, as after a crash of labd). */
#ifndef LABD_FAULT_H
#define LABD_FAULT_H

#ifdef LABD_FAULTS
void fault_point(const char *name, const char *step, long nth);
#define FAULT_POINT(name) fault_point((name), (const char *)0, -1)
#define FAULT_POINT_STEP(name, step) fault_point((name), (step), -1)
#define FAULT_POINT_NTH(name, n) fault_point((name), (const char *)0, (long)(n))
#else
#define FAULT_POINT(name) ((void)0)
#define FAULT_POINT_STEP(name, step) ((void)0)
#define FAULT_POINT_NTH(name, n) ((void)0)
#endif

#endif
