/* caps.h - per-user count of proxied requests in flight, so one user's
 * runtime (or one user's script) cannot hold every connection slot and worker
 * of labd: past [proxy] max_requests_per_user the gate answers 429. Keyed by
 * the runtime's owner: what is held is a slot on that runtime's proxy path.
 * Thread-safe. */
#ifndef LABD_CAPS_H
#define LABD_CAPS_H

/* Takes one of owner's slots: 0, or -EBUSY when owner already holds max
 * (-ENOMEM when out of memory). */
int caps_acquire(const char *owner, unsigned max);
/* Gives back a slot taken by caps_acquire. */
void caps_release(const char *owner);
/* owner's requests in flight (tests, metrics). */
unsigned caps_count(const char *owner);

#endif
