/* dbwatch.h - hears writes to the store's directory by any process (the host
 * CLI writes the database as root while labd-web runs), so the web process
 * notices them at once instead of polling SQLite's data_version every second.
 * One thread blocked in poll(2) on an inotify descriptor: it wakes only when
 * a file in the directory is written (its own writes included), and then
 * calls changed (from that thread), at most once per 100 ms. */
#ifndef LABD_WEB_DBWATCH_H
#define LABD_WEB_DBWATCH_H

struct dbwatch;

/* Watches dir (relative to the working directory or absolute). 0 with *out,
 * or a negative errno (logged): the caller then polls instead. */
int dbwatch_start(const char *dir, void (*changed)(void *ctx), void *ctx, struct dbwatch **out);
/* Stops and joins the thread, frees w (NULL ignored). */
void dbwatch_stop(struct dbwatch *w);

#endif
