"""Hot-path counters (acks, late acks, redeliveries) kept in memory and written in bulk.

Writing a counter row with every ack costs as much as the ack itself, so each
process adds them up and writes them at most every ``interval`` seconds, before
its own ``stats()``, on ``close()`` and at interpreter exit. A process killed
with SIGKILL loses at most ``interval`` seconds of these counts; queue depths
(ready, in flight, dead) are always exact, being counted from the messages.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable

Row = tuple[str, int, int, int]  # queue, acked, late_acks, redelivered


class PendingCounts:
    def __init__(self, interval: float = 1.0) -> None:
        self._interval = interval
        self._lock = threading.Lock()
        self._acked: Counter[str] = Counter()
        self._late: Counter[str] = Counter()
        self._redelivered: Counter[str] = Counter()
        self._last = time.monotonic()
        self._pid = os.getpid()

    def add(self, queue: str, acked: int = 0, late: int = 0, redelivered: int = 0) -> None:
        with self._lock:
            self._check_fork()
            self._acked[queue] += acked
            self._late[queue] += late
            self._redelivered[queue] += redelivered

    def _check_fork(self) -> None:
        if self._pid != os.getpid():  # counts inherited through fork belong to the parent
            self._pid = os.getpid()
            self._acked.clear()
            self._late.clear()
            self._redelivered.clear()

    def due(self) -> bool:
        return time.monotonic() - self._last >= self._interval and bool(
            self._acked or self._redelivered)

    def take(self) -> list[Row]:
        with self._lock:
            self._check_fork()
            self._last = time.monotonic()
            queues = set(self._acked) | set(self._redelivered)
            rows = [(q, self._acked[q], self._late[q], self._redelivered[q]) for q in queues]
            self._acked.clear()
            self._late.clear()
            self._redelivered.clear()
        return rows

    def restore(self, rows: list[Row]) -> None:
        """Put counts back after a failed write, so they go out with the next one."""
        for queue, acked, late, redelivered in rows:
            self.add(queue, acked, late, redelivered)


def flush_at_exit(owner: object, flush: Callable[[], None]) -> None:
    """Call ``flush`` at interpreter exit while ``owner`` is alive."""
    ref = weakref.ref(owner)
    method = getattr(flush, "__func__", None)

    def run() -> None:
        target = ref()
        if target is not None and method is not None:
            # The interpreter is going away; counts are best effort.
            with contextlib.suppress(Exception):
                method(target)

    atexit.register(run)
