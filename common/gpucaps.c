/* gpucaps.c - the driver's MIG capability files (include/labd/gpucaps.h). */
#include "labd/gpucaps.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "labd/gpudev.h"

#define ACCESS_MAX 4096 /* the driver's access files are a few lines */

/* The number after "DeviceFileMinor:" at the start of a line of text. */
static int device_file_minor(const char *text, unsigned *cap)
{
	static const char key[] = "DeviceFileMinor:";

	for (const char *p = text; p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, key, sizeof(key) - 1) != 0)
			continue;
		char *end;
		const char *v = p + sizeof(key) - 1;
		v += strspn(v, " \t");
		errno = 0;
		unsigned long n = strtoul(v, &end, 10);
		if (v[0] < '0' || v[0] > '9' || errno || n > 1048575 || (*end && *end != '\n' &&
									  *end != ' '))
			return -EINVAL;
		*cap = (unsigned)n;
		return 0;
	}
	return -EINVAL;
}

int gpucaps_minor(const char *caps_dir, unsigned minor, unsigned gi, int ci, unsigned *cap)
{
	char path[PATH_MAX], text[ACCESS_MAX];
	int fd, n;

	if (!caps_dir || minor > GPUDEV_MINOR_MAX || gi > GPUDEV_GI_MAX ||
	    ci > (int)GPUDEV_CI_MAX || ci < GPUCAPS_CI_NONE)
		return -EINVAL;
	if (ci == GPUCAPS_CI_NONE)
		n = snprintf(path, sizeof(path), "%s/gpu%u/mig/gi%u/access", caps_dir, minor, gi);
	else
		n = snprintf(path, sizeof(path), "%s/gpu%u/mig/gi%u/ci%d/access", caps_dir, minor,
			     gi, ci);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return errno == ENOTDIR ? -ENOENT : -errno;
	ssize_t got = read(fd, text, sizeof(text) - 1);
	int err = got < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err;
	text[got] = '\0';
	return device_file_minor(text, cap);
}

bool gpucaps_mig_used(const char *caps_dir, unsigned minor)
{
	char path[PATH_MAX];
	struct dirent *e;
	bool used = false;
	DIR *d;

	if (!caps_dir || snprintf(path, sizeof(path), "%s/gpu%u/mig", caps_dir, minor) >=
				 (int)sizeof(path) || !(d = opendir(path)))
		return false;
	while (!used && (e = readdir(d)))
		used = strncmp(e->d_name, "gi", 2) == 0 && e->d_name[2] >= '0' &&
		       e->d_name[2] <= '9';
	closedir(d);
	return used;
}

bool gpucaps_uuid_ok(const char *uuid)
{
	size_t n = uuid ? strlen(uuid) : 0;

	if (n <= 4 || n > GPUCAPS_UUID_MAX ||
	    (strncmp(uuid, "GPU-", 4) != 0 && strncmp(uuid, "MIG-", 4) != 0))
		return false;
	return strspn(uuid + 4, "0123456789abcdefABCDEF-") == n - 4;
}
