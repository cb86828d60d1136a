/* gitopen.h - "Open in labd": a repository cloned into the user's home, or
 * fast-forwarded there, by jupyterlab-git's server extension inside the
 * user's own runtime (so git runs as the user, in the sandbox, with the
 * user's network), asked over the runtime's Unix socket with its token.
 *
 * The folder is named from the URL (gitsource_folder). When it holds another
 * repository or is not a repository, "<name>-2" up to "<name>-9" are tried in
 * turn: the first that is a clone of the same URL is updated, the first that
 * does not exist gets the clone. A clone is made in a fresh staging folder
 * and renamed into place, so a half-made clone never takes the name.
 *
 * An existing clone is only ever fast-forwarded: after a fetch (which moves
 * remote-tracking refs only), it is pulled when its branch has an upstream,
 * is behind it and not ahead, no tracked file is changed and no merge or
 * rebase is under way. Otherwise it is left exactly as it was and the result
 * says why. Blocking: run it off the HTTP worker threads. */
#ifndef LABD_GITOPEN_H
#define LABD_GITOPEN_H

#include <stdbool.h>
#include <sys/types.h>

#include "runtime/gitsource.h"

#define GITOPEN_MESSAGE_MAX 512
#define GITOPEN_TIMEOUT_MS (10 * 60 * 1000) /* a whole open, clone included */

enum gitopen_outcome {
	GITOPEN_CLONED,	 /* a new clone */
	GITOPEN_UPDATED, /* an existing clone fast-forwarded */
	GITOPEN_CURRENT, /* an existing clone with nothing to pull */
	GITOPEN_KEPT,	 /* an existing clone left untouched: message says why */
	GITOPEN_FAILED,	 /* nothing usable: clone failed, no folder name free, no answer */
	GITOPEN_NO_GIT,	 /* the runtime has no jupyterlab-git (Notebook 6, plain server) */
};

/* The runtime asked: all borrowed for the call; peer_uid is the runtime's
 * host uid, which must be what listens on the socket (runtime/jupyter.h). */
struct gitopen_target {
	const char *socket_path, *user, *token;
	uid_t peer_uid;
};

struct gitopen_result {
	enum gitopen_outcome outcome;
	bool notebook_found; /* path exists in the folder (after the clone or update) */
	char folder[GITSOURCE_FOLDER_MAX]; /* under the home; "" when none */
	char message[GITOPEN_MESSAGE_MAX]; /* one sentence for the user */
};

/* Clones or updates url for the notebook at path (both checked by
 * gitsource_*) within timeout_ms. Always fills *out. */
void gitopen_run(const struct gitopen_target *t, const char *url, const char *path,
		 int timeout_ms, struct gitopen_result *out);
/* "cloned", "updated", "current", "kept", "failed", "unsupported". */
const char *gitopen_outcome_name(enum gitopen_outcome o);

#endif
