/* endcause.c - see endcause.h. */
#include "supervisor/endcause.h"

#include <stdio.h>

#include "labd/str.h"

void endcause_set(char cause[ENDCAUSE_CAUSE_MAX], char reason[ENDCAUSE_REASON_MAX],
		  bool *failed, const char *new_cause, bool new_failed, const char *new_reason)
{
	if (cause[0])
		return;
	snprintf(cause, ENDCAUSE_CAUSE_MAX, "%s", new_cause);
	snprintf(reason, ENDCAUSE_REASON_MAX, "%.*s",
		 (int)str_utf8_len(new_reason, ENDCAUSE_REASON_MAX - 1), new_reason);
	*failed = new_failed;
}
