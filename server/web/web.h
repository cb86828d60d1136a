/* web.h - the web process (labd-web): drops privileges, opens the store,
 * serves HTTP until SIGTERM. Forked by the supervisor, never exec'd. */
#ifndef LABD_WEB_H
#define LABD_WEB_H

struct labd_config;
struct privdrop_user;
struct db;

/* Runs the web process and exits; never returns. Takes ownership of the fds:
 * listen_fd (bound listening socket), supervisor_fd (its end of the supervisor
 * socketpair) and web_root_fd (O_PATH directory). Entered as root. */
_Noreturn void web_main(const struct labd_config *cfg, const struct privdrop_user *u,
			int listen_fd, int supervisor_fd, int web_root_fd);

/* As root: prepares the state dir, enters it and drops to the labd user, then
 * opens the store. Shared by the web process and the host CLI so that every
 * database file is always owned by the labd user. 0 or -1 (logged). */
int web_open_store_as_user(const struct labd_config *cfg, const struct privdrop_user *u,
			   struct db **out);

/* Creates the user "admin" with a random password, printed once on stdout, when
 * no administrator exists yet. 0 or -1. */
int web_bootstrap_admin(const struct labd_config *cfg, struct db *db);

#endif
