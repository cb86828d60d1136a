/* job_shell_relay.h - the bytes between a shell's WebSocket and its terminal
 * (docs/jobs.md, "A shell into a running job"). One thread per open shell (a few
 * per job, JOB_SHELLS_MAX in all): binary frames from the browser are keystrokes
 * into the pty, text frames are control messages ({"type":"resize","cols":C,
 * "rows":R}), and what the shell writes goes back as binary frames, at most
 * JOB_SHELL_RATE_BYTES_PER_S. Every buffer is bounded; a full one stops reading
 * from its source (the shell then blocks on its terminal), never grows. */
#ifndef LABD_JOB_SHELL_RELAY_H
#define LABD_JOB_SHELL_RELAY_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

#define JOB_SHELLS_PER_JOB 4
#define JOB_SHELLS_MAX 64
#define JOB_SHELL_RATE_BYTES_PER_S (1024 * 1024)
/* an answered open whose client never took the upgrade is given up after this */
#define JOB_SHELL_PENDING_MS 30000

struct app;
struct job_shell;

/* Who opened it, for the close's audit entry. */
struct job_shell_who {
	char actor[33];  /* the user's name */
	char address[64];
	int64_t job_id;
	char job_name[128];
	int64_t user_id;    /* the owner, who opened it */
	int64_t session_id; /* the session whose cookie opened it, or 0 */
	int64_t token_id;   /* the API token that opened it, or 0 */
};

/* Reserves a place for a shell into who's job: its id (never 0, never reused), or
 * 0 when the job or the server has no room left (pending opens count). Reservations
 * are named by id, never by pointer: one may be given up (JOB_SHELL_PENDING_MS, a
 * stop) while libmicrohttpd still holds the upgrade that names it. The caller gives
 * it its terminal with job_shell_relay_set_pty, then job_shell_relay_attach starts it
 * or job_shell_relay_cancel frees it. */
uint64_t job_shell_relay_reserve(struct app *app, const struct job_shell_who *who);
/* Takes over pty (the master): 0, or -ENOENT (pty closed) when id is gone. */
int job_shell_relay_set_pty(uint64_t id, int pty);
/* Frees a reservation never attached (its pty closed: the shell hangs up). */
void job_shell_relay_cancel(uint64_t id);
/* The upgrade happened: starts relaying between sock (closed only through
 * MHD_upgrade_action on urh) and the pty. extra bytes the client already sent are
 * copied. When id is gone, or on failure, everything is closed. */
void job_shell_relay_attach(uint64_t id, int sock, struct MHD_UpgradeResponseHandle *urh,
			    const char *extra, size_t n_extra);

/* Closes the shells an account event takes away (what: an enum app_close, as
 * app->close_connections: the user's, the user's opened with a session, one
 * session's, one token's) with close code 1008, within their thread's next turn;
 * returns how many. */
int job_shell_relay_close(int what, int64_t id);
/* labd-web stops: no shell opens any more, every open one is closed (1008) and its
 * close audited; returns once all are gone or after 3 s. Call before the store closes. */
void job_shell_relay_stop_all(void);

#endif
