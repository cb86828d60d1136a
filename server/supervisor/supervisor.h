/* supervisor.h - the root process: binds the listening socket, forks the web
 * process (restarting it with backoff when it dies) and answers its requests
 * over the socketpair. No HTTP and no SQL happen here. */
#ifndef LABD_SUPERVISOR_H
#define LABD_SUPERVISOR_H

struct labd_config;

/* Runs until SIGTERM/SIGINT; returns the process exit status (0 on a clean stop). */
int supervisor_run(const struct labd_config *cfg);

#endif
