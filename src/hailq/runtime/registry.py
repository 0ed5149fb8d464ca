"""The worker registry reporter: this process's heartbeat in the broker's worker table.

Every ``interval`` seconds, and at once when the state changes, the worker
records who it is (id, host, pid, queues, concurrency), how much it holds
(in flight) and its state: ``running``, ``draining`` or ``stopped``.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from hailq.errors import HailqError
from hailq.internal import ops
from hailq.models import RunningMessage, WorkerInfo
from hailq.outage import covers
from hailq.runtime.service import Service

if TYPE_CHECKING:
    from hailq.broker import Broker
    from hailq.message import Message

log = logging.getLogger("hailq.worker")


def new_worker_id() -> str:
    """A worker id unique across hosts and restarts: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class RegistryReporter(Service):
    """Saves a WorkerInfo now and then; thread-safe. ``start()``, ``set_state()``, ``close()``."""

    name = "hailq-registry"

    def __init__(self, broker: Broker, *, worker_id: str, queues: Sequence[str],
                 concurrency: int, in_flight: Callable[[], int], interval: float = 3.0,
                 running: Callable[[], list[tuple[Message, float]]] = list) -> None:
        """``running``: the messages in its slots with the seconds each has run."""
        super().__init__(interval, wait_first=True)
        self.worker_id = worker_id
        self._broker = broker
        self._queues = list(queues)
        self._concurrency = concurrency
        self._in_flight = in_flight
        self._running = running
        self._state = "running"
        self._started_at = 0.0

    def start(self) -> None:
        try:
            self._started_at = self._broker.now()
        except HailqError:
            self._started_at = 0.0
        self._save()
        super().start()

    def set_state(self, state: str) -> None:
        """Record a new state now (``running``, ``draining`` or ``stopped``)."""
        with self.lock:
            self._state = state
        self._save()

    def tick(self) -> float | None:
        self._save()
        return None

    def closed(self) -> None:
        """Stopped reporting: record ``stopped``."""
        self.set_state("stopped")

    def _save(self) -> None:
        info = WorkerInfo(
            id=self.worker_id, host=socket.gethostname(), pid=os.getpid(),
            queues=self._queues, concurrency=self._concurrency, in_flight=self._in_flight(),
            started_at=self._started_at, last_seen=0.0, state=self._state,
            running=[RunningMessage(m.id, m.queue, m.attempt, ago)  # since: seconds ago
                     for m, ago in self._running()])
        try:
            ops(self._broker).save_worker(info)
        except HailqError as exc:
            if not covers(exc):  # the outage's lines say it (hailq/outage.py)
                log.warning("could not record worker %s in the registry: %s", self.worker_id,
                            exc)
