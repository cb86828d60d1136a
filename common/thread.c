/* thread.c - see thread.h. */
#include "labd/thread.h"

#include <pthread.h>

int thread_detached(void *(*fn)(void *arg), void *arg, size_t stack_bytes)
{
	pthread_attr_t attr;
	pthread_t t;
	int rc = pthread_attr_init(&attr);

	if (rc != 0)
		return rc;
	rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (rc == 0 && stack_bytes)
		rc = pthread_attr_setstacksize(&attr, stack_bytes);
	if (rc == 0)
		rc = pthread_create(&t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return rc;
}
