/* boxes.h - the supervisor's runtimes: one sandbox per user running Jupyter,
 * with the deadline enforced here (so a dead web process cannot extend a
 * runtime), stop requests with a grace period, exit classification (OOM,
 * signal, status) and re-adoption of sandboxes that outlived a supervisor
 * restart. Single-threaded: called only from the supervisor's loop. */
#ifndef LABD_BOXES_H
#define LABD_BOXES_H

#include <jansson.h>
#include <poll.h>

struct labd_config;
struct boxes;

/* Prepares the state dirs and re-adopts sandboxes recorded there.
 * state_dir must be absolute. NULL on failure (logged). */
struct boxes *boxes_open(const struct labd_config *cfg, const char *state_dir);
/* Forgets the sandboxes without stopping them (they are re-adopted by the next
 * supervisor) and frees the set. */
void boxes_close(struct boxes *b);

/* Handlers for the IPC requests; each returns the reply (caller owns it).
 * msg has been validated by ipc_parse_request. */
json_t *boxes_start(struct boxes *b, long long id, json_t *msg);
json_t *boxes_stop(struct boxes *b, long long id, json_t *msg);
json_t *boxes_list(struct boxes *b, long long id);

/* Asks every running sandbox to stop (used when [runtime] keep_on_shutdown
 * is false); boxes_live() then counts down as they end. */
void boxes_stop_all(struct boxes *b, const char *reason);
int boxes_live(struct boxes *b);

/* Fills up to max pollfds to watch (one per running sandbox); returns how many. */
int boxes_pollfds(struct boxes *b, struct pollfd *fds, int max);
/* Handles readiness of fds filled by boxes_pollfds. */
void boxes_on_events(struct boxes *b, const struct pollfd *fds, int n);
/* Enforces deadlines and grace periods; returns ms until the next timer (-1 none). */
int boxes_tick(struct boxes *b);

/* The Jupyter argv for a user (pure; exposed for tests). kind is "lab",
 * "notebook" or "server"; the strings live in bufs[n][256]; argv is
 * NULL-terminated. Returns argc. */
int boxes_jupyter_argv(const char *kind, const char *user, char *argv[16], char bufs[][256]);
/* Chooses "lab", "notebook" or "server" for [runtime] jupyter = auto by
 * looking into the image; NULL when none is installed. */
const char *boxes_pick_jupyter(const char *setting, const char *image);

#endif
