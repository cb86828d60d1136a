/* endcause.h - why a sandbox ended, as sandbox_ended and pool_ended tell it (cause,
 * failed, reason), kept by one rule for every sandbox of the host (host.c). */
#ifndef LABD_SUPERVISOR_ENDCAUSE_H
#define LABD_SUPERVISOR_ENDCAUSE_H

#include <stdbool.h>

#define ENDCAUSE_CAUSE_MAX 16   /* bytes with the NUL; one of PROTO_CAUSES */
#define ENDCAUSE_REASON_MAX 200 /* bytes with the NUL; sandbox_ended's bound */

/* Records cause, failed and reason (cut on a UTF-8 boundary) unless cause[0] is set
 * already: the first cause stays. A kill after a stop is still the stop, an OOM in a
 * stop's grace too, and a start that fails after a stop was asked for ends as the stop.
 * The new strings may not point into cause or reason. */
void endcause_set(char cause[ENDCAUSE_CAUSE_MAX], char reason[ENDCAUSE_REASON_MAX],
		  bool *failed, const char *new_cause, bool new_failed, const char *new_reason);

#endif
