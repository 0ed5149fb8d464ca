"""The levels recorder: every worker and ``hailq serve`` record queue levels for the
dashboard's charts, once per 10-second slot across all of them.

At start and then just after each slot begins (with a little jitter, so processes do
not all come at the same instant), the duty asks the broker to record the slot's
levels (``RuntimeOps.record_levels``, hailq/internal.py). The first process of a slot
counts and writes; the others find the slot taken and count nothing (see the storage
side's docstring).
A write that fails (a role that may only read, rule 30; a database away for a while)
is logged once, and tried again a minute later (its count is not repeated every slot
for nothing): the dashboard still shows what the others recorded.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING

from hailq.errors import HailqError
from hailq.internal import ops
from hailq.outage import covers
from hailq.runtime.service import Service

if TYPE_CHECKING:
    from hailq.broker import Broker

log = logging.getLogger("hailq.levels")

SLOT = 10.0  # seconds per recorded level: the storage's slot, which a test holds equal
JITTER = 1.0  # seconds after a slot begins within which a process comes
FAILED_SKIPS = 5  # slots a process lets pass after a failed write before it tries again


class LevelsRecorder(Service):
    """Records levels each slot in a thread of its own. ``start()`` then ``close()``."""

    name = "hailq-levels"

    def __init__(self, broker: Broker, *, slot: float = SLOT) -> None:
        super().__init__(slot)
        self._broker = broker
        self._slot = slot
        self._failing = False
        self._skip = 0

    def record(self) -> bool:
        """One slot's turn: True if this process wrote the slot's levels."""
        try:
            wrote = ops(self._broker).record_levels()
        except HailqError as exc:
            if not self._failing and not covers(exc):  # an outage has lines of its own
                log.warning("queue levels not recorded (the dashboard's charts show what "
                            "was recorded; tried again every %gs): %s",
                            self._slot * (FAILED_SKIPS + 1), exc)
            self._failing = True
            return False
        if self._failing:
            log.info("queue levels recorded again")
        self._failing = False
        return wrote

    def tick(self) -> float | None:
        if self._skip:
            self._skip -= 1
        elif not self.record() and self._failing:
            self._skip = FAILED_SKIPS  # a role that may only read fails each time: rarely
        # Until just after the next slot begins, on this host's clock (the slot a write
        # lands in is taken on the broker's: a skew only shifts the jitter).
        now = time.time()
        return self._slot - now % self._slot + random.uniform(0.05, JITTER)
