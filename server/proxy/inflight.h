/* inflight.h - per-user count of proxied requests in flight, so one user's
 * runtime (or one user's script) cannot hold every connection slot and worker
 * of labd: past [proxy] max_requests_per_user the gate answers 429. Keyed by
 * the runtime's owner: what is held is a slot on that runtime's proxy path.
 * Thread-safe. */
#ifndef LABD_PROXY_INFLIGHT_H
#define LABD_PROXY_INFLIGHT_H

/* Takes one of owner's slots: 0, or -EBUSY when owner already holds max
 * (-ENOMEM when out of memory). */
int inflight_acquire(const char *owner, unsigned max);
/* Gives back a slot taken by inflight_acquire. */
void inflight_release(const char *owner);
/* owner's requests in flight (tests, metrics). */
unsigned inflight_count(const char *owner);

#endif
