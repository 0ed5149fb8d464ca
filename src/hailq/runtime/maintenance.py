"""The maintenance service: the broker's housekeeping, once per interval across processes.

Every worker and ``hailq serve`` runs one. Each ``Upkeep`` duty -- expired dedup
records, figures' slots past their retention, old autoscaler decisions, workers long
silent, history past each queue's ``retain`` (rule 40), and any duty another part
registers in ``UPKEEP`` -- has an interval; when it comes round, the process asks the
database for the duty's turn (``Backend.maintenance_claim``: one short statement, a
row lock for its transaction only) and does the work only if it got it, in bounded
batches. So N workers do each duty once per interval, not N times, and a process that
stops leaves the turn to the others. Claim-time upkeep (due messages, ended leases:
rule 13) is not here: it is part of every claim.

A process whose role may only read (rule 30) fails at the claim: it skips every duty
quietly, and asks again only after ``QUIET`` seconds.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hailq.errors import HailqError
from hailq.internal import ops
from hailq.outage import covers
from hailq.runtime.service import Service

if TYPE_CHECKING:
    from hailq.broker import Broker

log = logging.getLogger("hailq.maintenance")

QUIET = 600.0  # seconds a process that could not claim a turn leaves the duties alone
AUTOSCALE_KEEP = 3600.0  # seconds autoscaler decisions are kept
FORGET_WORKERS = 86400.0  # seconds a silent worker stays listed


@dataclass(frozen=True, slots=True)
class Upkeep:
    """One maintenance duty. ``name`` is its row in the maintenance table (and, with
    no ``run``, its statements in the storage's ``PRUNES``); ``every``: seconds
    between its turns, across every process; ``keep``: seconds its rows are kept.
    ``run`` does one turn's work and says how many rows went."""

    name: str
    every: float
    keep: float = 0.0
    run: Callable[[Broker, Upkeep], int] | None = None

    def work(self, broker: Broker) -> int:
        if self.run is not None:
            return self.run(broker, self)
        return ops(broker).prune(self.name, self.keep)


def _prune_history(broker: Broker, duty: Upkeep) -> int:
    return ops(broker).prune_history()


DEADLINE_POOLS_EVERY = 10.0  # seconds between two stores of the deadline queues' pools


def store_deadline_pools(broker: Broker, duty: Upkeep) -> int:
    """Rule 41: store the pool of each queue in deadline order, which PostgreSQL's
    ``desired_workers`` view reads while stored in the last minute (migration 16)."""
    ops(broker).store_deadline_pools()
    return 0  # rows replaced, none pruned


# The duties every maintenance service runs; a part with housekeeping of its own adds
# its duty here (with its statements in PRUNES, or a ``run`` of its own).
UPKEEP: list[Upkeep] = [
    Upkeep("dedup", 60.0),
    Upkeep("figures", 60.0),
    Upkeep("autoscale", 300.0, keep=AUTOSCALE_KEEP),
    Upkeep("workers", 600.0, keep=FORGET_WORKERS),
    Upkeep("history", 60.0, run=_prune_history),  # each queue's own retention
    Upkeep("deadline_pools", DEADLINE_POOLS_EVERY, run=store_deadline_pools),
]


class Maintenance(Service):
    """Runs the duties due, each only on this process's turn. ``start()`` then ``close()``.

    ``duties``: None for ``UPKEEP``; ``look``: the longest sleep between two looks at
    what is due."""

    name = "hailq-maintenance"

    def __init__(self, broker: Broker, duties: Sequence[Upkeep] | None = None, *,
                 look: float = 30.0) -> None:
        super().__init__(look)
        self._broker = broker
        self._duties = list(UPKEEP if duties is None else duties)
        # monotonic: when this process asks for each duty's turn again. Spread over the
        # first interval, so processes started together do not all ask at once.
        now = time.monotonic()
        self._asks = {d.name: now + random.uniform(0.0, min(d.every, look) / 2)
                      for d in self._duties}
        self._quiet_until = 0.0
        self.done: dict[str, int] = {}  # turns this process took, by duty

    @property
    def skipping(self) -> bool:
        """Whether this process leaves the duties to the others for now (it could not
        claim a turn: a role that may only read, or an outage)."""
        return time.monotonic() < self._quiet_until

    def tick(self) -> float | None:
        now = time.monotonic()
        if now >= self._quiet_until:
            for duty in self._duties:
                if self._asks[duty.name] <= now and not self._turn(duty, now):
                    break
        soonest = min(self._asks.values(), default=now + self.interval)
        return min(max(soonest - time.monotonic(), 0.01), self.interval)

    def _turn(self, duty: Upkeep, now: float) -> bool:
        """Claim and do one duty if it is this process's turn; False to stop asking."""
        # Whoever takes it, the next turn is ``every`` on: ask again then.
        self._asks[duty.name] = now + duty.every * random.uniform(1.0, 1.1)
        try:
            if not ops(self._broker).take_maintenance_turn(duty.name, duty.every):
                return True
        except HailqError as exc:
            # A role that may only read: leave it to the others; an outage: try later.
            outage = covers(exc)
            if not outage:
                log.debug("maintenance skipped for %g s: %s", QUIET, exc)
            self._quiet_until = now + (duty.every if outage else QUIET)
            return False
        try:
            pruned = duty.work(self._broker)
        except HailqError as exc:
            if not covers(exc):
                log.warning("maintenance %s failed (tried again in %g s): %s", duty.name,
                            duty.every, exc)
            return True
        self.done[duty.name] = self.done.get(duty.name, 0) + 1
        if pruned:
            log.debug("maintenance %s: %d row(s) pruned", duty.name, pruned)
        return True
