/* record.c - re-adoption records; see record.h. */
#include "supervisor/record.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "labd/log.h"

int record_save(const char *path, json_t *j)
{
	char tmp[4096];
	int rc = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
		log_error("save %s: the path is too long", path);
		return -ENAMETOOLONG;
	}
	errno = 0;
	if (!j || json_dump_file(j, tmp, JSON_COMPACT) < 0)
		rc = -(errno ? errno : EIO);
	else if (rename(tmp, path) < 0)
		rc = -errno;
	if (rc == 0)
		return 0;
	unlink(tmp);
	errno = -rc;
	log_errno("save %s", path);
	return rc;
}
