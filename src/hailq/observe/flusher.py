"""The figures' flusher: a ``Service`` that flushes one recorder every ``interval``.

It holds its recorder weakly: a broker dropped without ``close()`` is collected with
its backend (whose finalizer closes the pools), and the flusher ends at its next look.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from hailq.runtime.service import Service

if TYPE_CHECKING:
    from hailq.observe.recorder import FigureRecorder


class FiguresFlusher(Service):
    """Calls the recorder's ``_tick`` (a flush) each ``interval`` while the recorder lives."""

    name = "hailq-figures"

    def __init__(self, recorder: FigureRecorder, interval: float) -> None:
        super().__init__(interval, wait_first=True)
        self._recorder = weakref.ref(recorder)

    def tick(self) -> float | None:
        recorder = self._recorder()
        if recorder is None:
            with self.lock:
                self.closing = True  # its recorder was collected: nothing left to flush
            return None
        recorder._tick()
        return None
