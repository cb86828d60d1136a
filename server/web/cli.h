/* cli.h - host-side administration: `labd user add|passwd|list`. Runs as root,
 * drops to the labd user before touching the store (as the web process does). */
#ifndef LABD_CLI_H
#define LABD_CLI_H

struct labd_config;

/* argv[0] is "user"; returns the process exit status. */
int cli_user(const struct labd_config *cfg, int argc, char **argv);

#endif
