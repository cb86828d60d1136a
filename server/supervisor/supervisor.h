/* supervisor.h - the root process: binds the listening socket, forks the web
 * process (restarting it with backoff when it dies) and answers its requests
 * over the socketpair. No HTTP and no SQL happen here. */
#ifndef LABD_SUPERVISOR_H
#define LABD_SUPERVISOR_H

struct labd_config;

/* Runs until SIGTERM/SIGINT; returns the process exit status (0 on a clean stop). */
int supervisor_run(const struct labd_config *cfg);
/* The same for `labd node` (supervisor/node.h): the link process instead of labd-web,
 * the data port instead of the HTTP listener; cfg prepared by node_prepare. */
int supervisor_run_node(const struct labd_config *cfg);

#endif
