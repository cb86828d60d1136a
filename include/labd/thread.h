/* thread.h - a detached thread in one call: for work that ends by itself (a
 * relay, a request's blocking step) and that nobody joins. */
#ifndef LABD_THREAD_H
#define LABD_THREAD_H

#include <stddef.h>

/* Starts fn(arg) detached, with a stack of stack_bytes (0: the default): 0, or
 * pthread_create's error number. */
int thread_detached(void *(*fn)(void *arg), void *arg, size_t stack_bytes);

#endif
