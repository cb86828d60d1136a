/* backup.h - `labd backup`, `labd restore` and `labd restore-home`: the host CLI
 * that copies a state dir out and back (docs/operations.md "Backup and restore").
 * Runs as root, beside a running labd or with it stopped. */
#ifndef LABD_WEB_BACKUP_H
#define LABD_WEB_BACKUP_H

#include <stdbool.h>

struct labd_config;

/* Whether word is one of the subcommands backup_cli runs. */
bool backup_is_command(const char *word);
/* argv[0] is the subcommand; returns the process exit status. */
int backup_cli(const struct labd_config *cfg, int argc, char **argv);

#endif
