/* record.h - the JSON records a restarted supervisor reads back (boxes/<user>.json of a
 * runtime, pools/<id>/record.json of a job pool), written one way for both. */
#ifndef LABD_SUPERVISOR_RECORD_H
#define LABD_SUPERVISOR_RECORD_H

#include <jansson.h>

/* Writes j (not consumed) to path through path.tmp and a rename, so a reader sees
 * the old record or the new one, never half of one. 0, or a negative errno, logged
 * here once (callers only decide what the failure means). Not fsynced: it runs in
 * the supervisor's loop, and a record lost with the machine is lost with the
 * sandboxes it describes. */
int record_save(const char *path, json_t *j);

#endif
