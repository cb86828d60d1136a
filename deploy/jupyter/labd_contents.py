"""The contents manager of labd's JupyterLab environment (deploy/jupyter/install.sh).

Jupyter Server lists a directory in two steps: it reads the names, then builds
each entry's model. A file renamed or deleted between the two makes the whole
listing a 404, and JupyterLab then blocks the page with "Directory not found".
That happens in normal use: naming a new notebook on its first save renames it
while the file browser refreshes. A listing that fails so while the directory
itself is still there is read again; a directory that is really gone still
answers 404 at once.
"""

import os

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from tornado import web

# Each try loses only to a change made in the few microseconds between two
# system calls; five in a row means the directory is being rewritten
# continuously, and the 404 is passed on.
LISTING_TRIES = 5


class ListingContentsManager(AsyncLargeFileManager):
    """Jupyter Server's default manager, with listings that survive a rename."""

    async def get(self, path, content=True, type=None, format=None, **kwargs):
        args = dict(content=content, type=type, format=format, **kwargs)
        if content and type in (None, "directory"):
            for _ in range(LISTING_TRIES - 1):
                try:
                    return await super().get(path, **args)
                except web.HTTPError as err:
                    if err.status_code != 404 or not self._is_listable(path):
                        raise
        return await super().get(path, **args)

    def _is_listable(self, path):
        try:
            return os.path.isdir(self._get_os_path(path.strip("/")))
        except web.HTTPError:  # a path outside the root
            return False
