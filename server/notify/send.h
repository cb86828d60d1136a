/* send.h - one attempt of one delivery: an HTTP(S) POST through libcurl
 * that connects only where target.h allows, follows no redirect, ignores
 * proxies from the environment and ends within a timeout. Blocks the
 * calling thread (the notify ticker's, never a request's) for at most that. */
#ifndef LABD_NOTIFY_SEND_H
#define LABD_NOTIFY_SEND_H

#include <stdint.h>

#include "store/webhooks.h"

struct notify_request {
	const char *url, *secret, *event, *body;
	int64_t delivery_id;
	int64_t timeout_s;
	const char *deny; /* [network] deny */
};

struct notify_result {
	int status;      /* the receiver's HTTP status; 0 when it gave none */
	bool refused;    /* the address was refused (target.h): no retry helps */
	int64_t duration_ms;
	char error[WEBHOOK_ERROR_MAX]; /* "" when it answered */
};

/* Makes the attempt; fills *res. */
void notify_send(const struct notify_request *rq, struct notify_result *res);

#endif
