"""The levels recorder: every worker and ``hailq serve`` record queue levels for the
dashboard's charts, once per 10-second slot across all of them.

At start and then just after each slot begins (with a little jitter, so processes do
not all come at the same instant), the duty asks the broker to record the slot's
levels (``Broker.record_levels``). The first process of a slot counts and writes; the
others find the slot taken and count nothing (see the storage side's docstring).
A write that fails (a role that may only read, rule 30; a database away for a while)
is logged once, and tried again a minute later (its count is not repeated every slot
for nothing): the dashboard still shows what the others recorded.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import TYPE_CHECKING

from hailq.errors import HailqError

if TYPE_CHECKING:
    from hailq.broker import Broker

log = logging.getLogger("hailq.levels")

SLOT = 10.0  # seconds per recorded level: the storage's slot, which a test holds equal
JITTER = 1.0  # seconds after a slot begins within which a process comes
FAILED_SKIPS = 5  # slots a process lets pass after a failed write before it tries again


class LevelsRecorder:
    """Records levels each slot in a thread of its own. ``start()`` then ``close()``."""

    def __init__(self, broker: Broker, *, slot: float = SLOT) -> None:
        self._broker = broker
        self._slot = slot
        self._stop = threading.Event()
        self._failing = False
        self._thread = threading.Thread(target=self._run, name="hailq-levels", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)

    def record(self) -> bool:
        """One slot's turn: True if this process wrote the slot's levels."""
        try:
            wrote = self._broker.record_levels()
        except HailqError as exc:
            if not self._failing:
                log.warning("queue levels not recorded (the dashboard's charts show what "
                            "was recorded; tried again every %gs): %s",
                            self._slot * (FAILED_SKIPS + 1), exc)
            self._failing = True
            return False
        if self._failing:
            log.info("queue levels recorded again")
        self._failing = False
        return wrote

    def _run(self) -> None:
        skip = 0
        while not self._stop.is_set():
            if skip:
                skip -= 1
            elif not self.record() and self._failing:
                skip = FAILED_SKIPS  # a role that may only read fails each time: rarely
            # Until just after the next slot begins, on this host's clock (the slot a
            # write lands in is taken on the broker's: a skew only shifts the jitter).
            now = time.time()
            wait = self._slot - now % self._slot + random.uniform(0.05, JITTER)
            self._stop.wait(wait)
