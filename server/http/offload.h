/* offload.h - threads of their own for request work that blocks for tens of
 * ms or more (a password hash, a call to the identity provider).
 *
 * A worker thread serves every connection it has accepted, kept-alive ones
 * included, so work that blocks it holds all of them up: under a login flood
 * a health check waited a whole scrypt hash, over a second on a loaded
 * machine. Such work runs here instead, one thread each (a thread costs tens
 * of us, the work tens of ms); at most OFFLOAD_MAX at once. */
#ifndef LABD_OFFLOAD_H
#define LABD_OFFLOAD_H

#define OFFLOAD_MAX 128

/* Runs fn(arg) on a new detached thread: 0, or -1 when OFFLOAD_MAX run
 * already, offload_drain has begun or no thread could start (the caller
 * then runs fn itself). */
int offload_run(void (*fn)(void *arg), void *arg);
/* Refuses new work and waits until every fn started has returned; for the
 * shutdown, before the connections those fns answer are closed. */
void offload_drain(void);

#endif
