"""The cancel watch: a worker learns within a second that a message it runs was cancelled.

A lease keeper hears of changes only when it renews (a third of the lease), far too
late for an operator's "stop that one" (rule 40). So twice a second, while the worker
has messages in flight, this service asks the database which of them were cancelled:
one read per queue, by the rows' positions, and none at all while the worker is idle.
For each one found, ``cancel(message)`` stops its handler through the time limit's
mechanism (``hailq/runtime/timelimit.py``): ``HandlerCancelled`` raised into its
thread, an async one's task cancelled, a process-pool child ended. The worker lets the
message go once the handler has stopped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from hailq.queue import Message, Queue
from hailq.runtime.service import Service

EVERY = 0.5  # seconds between looks: a cancel reaches its handler within about this


class CancelWatch(Service):
    """Polls the cancelled state of ``in_flight()`` messages every ``every`` seconds and
    calls ``cancel(message)`` once for each one an operator cancelled."""

    name = "hailq-cancels"

    def __init__(self, queues: Mapping[str, Queue], in_flight: Callable[[], list[Message]],
                 cancel: Callable[[Message], None], *, every: float = EVERY) -> None:
        super().__init__(every)
        self._queues = queues
        self._in_flight = in_flight
        self._cancel = cancel
        self._told: set[str] = set()  # receipts already cancelled: told once
        self._told_lock = threading.Lock()

    def tick(self) -> float | None:
        held = self._in_flight()
        with self._told_lock:
            self._told &= {m.receipt for m in held}  # forget what left the slots
            fresh = [m for m in held if m.receipt not in self._told]
        by_queue: dict[str, list[Message]] = {}
        for message in fresh:
            by_queue.setdefault(message.queue, []).append(message)
        for name, group in by_queue.items():
            found = set(self._queues[name].cancelled(group))
            for message in group:
                if message.id in found:
                    with self._told_lock:
                        self._told.add(message.receipt)
                    self._cancel(message)
        return None
