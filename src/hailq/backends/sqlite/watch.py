"""Sleep until something writes to the database's folder (Linux inotify).

A commit appends to the ``-wal`` file, which wakes every waiting receiver at
once; an idle receiver costs no CPU. Where inotify is not available,
``FolderWatch.open`` returns None and receivers poll instead.
"""

from __future__ import annotations

import contextlib

try:
    from inotify_simple import INotify, flags
except ImportError:  # not Linux, or the package is missing: callers poll
    INotify = None


class FolderWatch:
    """One inotify instance watching one folder for modified files."""

    def __init__(self, notify: INotify) -> None:
        self._notify = notify

    @classmethod
    def open(cls, folder: str) -> FolderWatch | None:
        if INotify is None:
            return None
        try:
            notify = INotify()
            notify.add_watch(folder or ".", flags.MODIFY | flags.CREATE)
        except OSError:
            return None
        return cls(notify)

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; True if a file in the folder was written."""
        if timeout <= 0:
            return False
        return bool(self._notify.read(timeout=max(int(timeout * 1000), 1)))

    def fileno(self) -> int:
        """The descriptor that turns readable when a file was written (an event loop's)."""
        return int(self._notify.fileno())

    def drain(self) -> None:
        """Read the events that are there, without waiting."""
        with contextlib.suppress(OSError):
            self._notify.read(timeout=0)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._notify.close()
