"""Keeps a process's queues' settings as the database holds them (SPEC rules 32, 39).

What a claim, a send or a nack obeys is read by its statement where it runs. What a
worker times by itself (its lease renewals, its service-level targets for the figures,
its count of attempts in the log) comes from the ``Queue`` objects it received with:
this service reads their effective settings (declared, with an operator's overrides)
every ``REFRESH_EVERY`` seconds, one read for every queue, and lays them over those
objects, so an operator's change reaches the worker within a second. A change of the
lease has the lease keeper renew at once, to the new length.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from hailq.backends.base import QueueDescribeParams
from hailq.queue import Queue
from hailq.runtime.service import Service
from hailq.settings import QueueSettings, parse_overrides

if TYPE_CHECKING:
    from hailq.backends.base import Backend

REFRESH_EVERY = 0.5  # seconds between reads: a change reaches the worker within a second


class SettingsWatch(Service):
    """Refreshes ``queues``' settings; ``lease_changed(name)`` when a queue's lease did."""

    name = "hailq-settings"

    def __init__(self, backend: Backend, queues: Mapping[str, Queue],
                 lease_changed: Callable[[str], None],
                 interval: float = REFRESH_EVERY) -> None:
        super().__init__(interval, wait_first=True)
        self._backend = backend
        self._queues = queues
        self._lease_changed = lease_changed
        self._seen: dict[str, tuple[str, str | None]] = {}  # as read last: no re-parsing

    def tick(self) -> float | None:
        if not self._queues:
            return None
        for record in self._backend.queue_describe(QueueDescribeParams(list(self._queues))):
            queue = self._queues.get(record.name)
            stored = (record.declared, record.overrides)
            if queue is None or self._seen.get(record.name) == stored:
                continue
            self._seen[record.name] = stored
            overrides = parse_overrides(record.overrides)
            settings = QueueSettings.from_json(record.declared).overlay(overrides)
            lease = queue.settings.lease
            queue.settings, queue.overrides = settings, overrides
            if settings.lease != lease:
                self._lease_changed(record.name)
        return None
