/* doctor.h - `labd doctor [--fix]`: what a crash left, and the host's prerequisites.
 *
 * Runs as root on the host, labd running or not: each finding is one line, "OK",
 * "WARN", "FAIL", "LEFT" (a leftover of a crash) or "FIXED", with a remedy after
 * " -- ". --fix removes the leftovers, and only while no labd holds the state dir's
 * lock (statedir.h). docs/operations.md "labd doctor" lists every check. */
#ifndef LABD_SUPERVISOR_DOCTOR_H
#define LABD_SUPERVISOR_DOCTOR_H

#include <stdbool.h>

struct labd_config;

enum doctor_level { DOCTOR_OK, DOCTOR_WARN, DOCTOR_FAIL, DOCTOR_LEFT, DOCTOR_FIXED };

/* argv[0] is "doctor"; returns the exit status: 0, 1 when a check failed or a
 * leftover remains, 2 on bad usage or a --fix while labd runs. */
int doctor_main(const struct labd_config *cfg, int argc, char **argv);

/* One line of the report (remedy may be NULL). */
void doctor_say(enum doctor_level level, const char *remedy, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The host's prerequisites; the worst level seen (OK, WARN or FAIL). */
enum doctor_level doctor_host(const struct labd_config *cfg);

/* What a crash left under state_dir (labd_runs: a starting sandbox is not one);
 * with fix, removes it first. A sandbox's cgroups are looked for under the parent its
 * state file names, else under cgroup_parent ("labd", or a node's labd-<name>). The
 * number of leftovers that remain. */
int doctor_leftovers(const char *state_dir, const char *cgroup_parent, bool labd_runs,
		     bool fix);

#endif
