"""The scheduler: sends the due slots of periodic schedules (SPEC rule 35).

One small service. Every worker runs one (unless ``--no-scheduler``) and
``hailq scheduler`` runs one alone; any number may run at once. Each pass it
declares its app's schedules (a new one is stored with its creation time as its
last slot), reads every stored schedule, and for each one that is due sends the
slots ``hailq.policy.slots.due`` picks, claiming them in the transaction that
sends them (``schedule_fire``): each slot is sent once however many schedulers
run, and a scheduler that dies mid-way leaves the slot to the others.

The clock is the broker's (the database's on PostgreSQL) unless one is given
(tests drive time with it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from hailq._time import Clock
from hailq.broker import Broker
from hailq.internal import ops
from hailq.models import ScheduleInfo
from hailq.outage import covers
from hailq.policy import slots
from hailq.runtime.service import Service
from hailq.schedule import (
    DECLARE_EVERY,
    SCHEDULE_HEADER,
    SLOT_HEADER,
    Periodic,
    is_declared,
    slot_text,
)

log = logging.getLogger("hailq.scheduler")

__all__ = ["SCHEDULE_HEADER", "SLOT_HEADER", "Scheduler"]


class Scheduler(Service):
    """Sends due slots of every stored schedule; declares ``periodics`` as it runs.

    ``run_once()`` does one pass (tests call it with an injected ``clock``);
    ``start()`` runs passes on a thread of its own until ``close()``, waking at the
    next slot due and at least every ``tick`` seconds (so it sees schedules that
    others add, pause or remove).
    """

    def __init__(self, broker: Broker, periodics: Iterable[Periodic] = (), *,
                 clock: Clock | None = None, tick: float = 1.0) -> None:
        super().__init__(max(float(tick), 0.01))
        self.broker = broker
        self.periodics = list(periodics)
        self._clock = clock or broker.now
        self._declared_at: float | None = None

    # -- one pass ----------------------------------------------------------------------

    def declare(self) -> None:
        """Store this scheduler's schedules (new ones start now) and mark them declared."""
        now = self._clock()
        ops(self.broker).declare_schedules(self.periodics, now)
        self._declared_at = now

    def run_once(self) -> int:
        """One pass: declare when due, send what is due; the number of messages sent."""
        now = self._clock()
        if self._declared_at is None:
            self.declare()
        elif now - self._declared_at >= DECLARE_EVERY or now < self._declared_at:
            ops(self.broker).keep_schedules_declared([p.name for p in self.periodics], now)
            self._declared_at = now
        sent = 0
        for schedule in self.broker.schedules():
            if not schedule.paused and is_declared(schedule, now):
                sent += self._fire(schedule, now)
        return sent

    def _fire(self, schedule: ScheduleInfo, now: float) -> int:
        due = slots.due(schedule.cron, schedule.every, schedule.timezone,
                        schedule.last_slot, now, schedule.catch_up)
        if not due or not ops(self.broker).send_slots(schedule, due, now):
            return 0  # nothing due, or another scheduler sent it (or it was paused)
        log.info("schedule %s sent %d message(s) to %s for %s", schedule.name, len(due),
                 schedule.queue, ", ".join(slot_text(s) for s in due))
        return len(due)

    def next_due(self) -> float | None:
        """The soonest slot of any sendable schedule, on the scheduler's clock."""
        now = self._clock()
        soonest: float | None = None
        for schedule in self.broker.schedules():
            if schedule.paused or not is_declared(schedule, now):
                continue
            slot = slots.next_slot(schedule.cron, schedule.every, schedule.timezone,
                                   max(schedule.last_slot, now))
            soonest = slot if soonest is None else min(soonest, slot)
        return soonest

    # -- as a service ------------------------------------------------------------------

    def tick(self) -> float | None:
        """A pass, then sleep until the next slot due, at most ``tick`` seconds."""
        try:
            self.run_once()
            upcoming = self.next_due()
        except Exception as exc:  # the database may be away: look again later
            if not covers(exc):  # the outage's lines say it (hailq/outage.py)
                log.warning("scheduler pass failed (%s: %s); trying again",
                            type(exc).__name__, exc)
            return max(self.interval, 1.0)
        if upcoming is None:
            return None
        return min(self.interval, max(upcoming - self._clock(), 0.0) + 0.01)

    def run(self) -> None:
        """Pass after pass until ``close()`` (in the calling thread)."""
        self._run()
