"""Keeps a worker's queues' settings as the database holds them (SPEC rules 32, 39).

What a claim, a send or a nack obeys is read by its statement where it runs. What a
worker times by itself (its lease renewals, its service-level targets for the figures,
its count of attempts in the log) comes from the ``Queue`` objects it received with:
this service has the broker lay their effective settings (declared, with an operator's
overrides) over those objects every ``REFRESH_EVERY`` seconds, one read for every
queue, so an operator's change reaches the worker within a second. A change of the
lease has the lease keeper renew at once, to the new length.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from hailq.internal import ops
from hailq.runtime.service import Service

if TYPE_CHECKING:
    from hailq.broker import Broker
    from hailq.queue import Queue

REFRESH_EVERY = 0.5  # seconds between reads: a change reaches the worker within a second


class SettingsWatch(Service):
    """Refreshes ``queues``' settings; ``lease_changed(name)`` when a queue's lease did."""

    name = "hailq-settings"

    def __init__(self, broker: Broker, queues: Mapping[str, Queue],
                 lease_changed: Callable[[str], None],
                 interval: float = REFRESH_EVERY) -> None:
        super().__init__(interval, wait_first=True)
        self._broker = broker
        self._queues = queues
        self._lease_changed = lease_changed

    def tick(self) -> float | None:
        if self._queues:
            for name in ops(self._broker).refresh(list(self._queues.values())):
                self._lease_changed(name)
        return None
