/* boxes.h - the supervisor's runtimes: one sandbox per user running Jupyter,
 * with the deadline enforced here (so a dead web process cannot extend a
 * runtime), stop requests with a grace period, exit classification (OOM,
 * signal, status) and re-adoption of sandboxes that outlived a supervisor
 * restart. Single-threaded: called only from the supervisor's loop. */
#ifndef LABD_SANDBOXES_H
#define LABD_SANDBOXES_H

#include <jansson.h>
#include <poll.h>

struct labd_config;
struct sandboxes;

/* Prepares the state dirs and re-adopts sandboxes recorded there.
 * state_dir must be absolute. NULL on failure (logged). */
struct sandboxes *sandboxes_open(const struct labd_config *cfg, const char *state_dir);
/* Forgets the sandboxes without stopping them (they are re-adopted by the next
 * supervisor) and frees the set. */
void sandboxes_close(struct sandboxes *b);

/* Handlers for the IPC requests; each returns the reply (caller owns it).
 * msg has been validated by ipc_parse_request. */
json_t *sandboxes_start(struct sandboxes *b, long long id, json_t *msg);
json_t *sandboxes_stop(struct sandboxes *b, long long id, json_t *msg);
json_t *sandboxes_list(struct sandboxes *b, long long id);

/* Asks every running sandbox to stop (used when [runtime] keep_on_shutdown
 * is false); sandboxes_live() then counts down as they end. */
void sandboxes_stop_all(struct sandboxes *b, const char *reason);
int sandboxes_live(struct sandboxes *b);

/* Fills up to max pollfds to watch (one per running sandbox); returns how many. */
int sandboxes_pollfds(struct sandboxes *b, struct pollfd *fds, int max);
/* Handles readiness of fds filled by sandboxes_pollfds. */
void sandboxes_on_events(struct sandboxes *b, const struct pollfd *fds, int n);
/* Enforces deadlines and grace periods; returns ms until the next timer (-1 none). */
int sandboxes_tick(struct sandboxes *b);

/* The Jupyter argv for a user (pure; exposed for tests). kind is "lab",
 * "notebook" or "server"; the strings live in bufs[n][256]; argv is
 * NULL-terminated. Returns argc. */
int sandboxes_jupyter_argv(const char *kind, const char *user, char *argv[16], char bufs[][256]);
/* Chooses "lab", "notebook" or "server" for [runtime] jupyter = auto by
 * looking into the image; NULL when none is installed. */
const char *sandboxes_pick_jupyter(const char *setting, const char *image);

#endif
