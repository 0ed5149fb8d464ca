"""Periodic schedules (SPEC rule 35), the storage side: a mixin of ``SqlBackend``.

A schedule is one row per name with what it sends and the last slot sent. A scheduler
sends due slots with ``schedule_fire``: one transaction moves ``last_slot`` from the
value the scheduler saw to the newest slot it sends, and inserts the slots' messages.
Only one scheduler can move it from that value, so each slot is sent once however many
schedulers run (not by a dedup id, whose window may be shorter than the period), and a
scheduler that dies before its commit leaves the slot to the next one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # base.py's Backend includes ScheduleBackend: no imports at run time
    from hailq.backends.base import NewMessage
    from hailq.backends.dialect import Dialect, Tx


@dataclass(frozen=True, slots=True)
class ScheduleDefinition:
    """What a schedule is, as declared and as stored; the body already encoded."""

    name: str
    queue: str
    cron: str | None
    every: float | None
    timezone: str
    catch_up: int
    body: bytes
    body_kind: int
    headers: str | None
    priority: int
    source: str  # "app" or "broker"


@dataclass(frozen=True, slots=True)
class ScheduleSaveParams(ScheduleDefinition):
    """A schedule's definition to save."""

    now: float  # the scheduler's clock: a new schedule's first "last slot"


@dataclass(frozen=True, slots=True)
class ScheduleFireParams:
    name: str
    seen: float  # last_slot as the scheduler read it
    slot: float  # the newest slot it sends
    now: float
    messages: Sequence[NewMessage]  # one per slot


@dataclass(frozen=True, slots=True)
class ScheduleRow(ScheduleDefinition):
    """A stored schedule as the database returned it."""

    paused: bool
    created_at: float
    declared_at: float
    last_slot: float
    fired_at: float | None
    fired: int


class ScheduleBackend(Protocol):
    """The schedules' part of the seam (``Backend`` has the rest)."""

    def schedule_save(self, params: ScheduleSaveParams) -> None:
        """Declare a schedule or update its definition; its last slot, pause and counts
        stay. A new one's last slot is ``params.now``: no slot before it fires."""
        ...

    def schedule_declare(self, names: Sequence[str], now: float) -> None:
        """A running scheduler still declares these schedules (as of ``now``)."""
        ...

    def schedule_list(self) -> list[ScheduleRow]:
        """Every stored schedule, by name; a read."""
        ...

    def schedule_fire(self, params: ScheduleFireParams) -> bool:
        """Move the schedule's last slot from ``seen`` to ``slot`` and send the messages,
        in one transaction; False (nothing sent) if another scheduler moved it first,
        or the schedule is paused or gone."""
        ...

    def schedule_pause(self, name: str, paused: bool, now: float) -> bool:
        """Pause or resume; a resumed schedule goes on from ``now`` (the slots of its
        pause are not sent). False if there is no such schedule."""
        ...

    def schedule_delete(self, name: str) -> bool:
        """Forget a schedule; False if there was none."""
        ...


class ScheduleStore:
    """``ScheduleBackend`` over a SQL dialect (``SqlBackend`` inherits it)."""

    dialect: Dialect

    def schedule_save(self, params: ScheduleSaveParams) -> None:
        args = {"name": params.name, "queue": params.queue, "cron": params.cron,
                "every": params.every, "timezone": params.timezone,
                "catch_up": params.catch_up, "body": params.body,
                "body_kind": params.body_kind, "headers": params.headers,
                "priority": params.priority, "source": params.source, "now": params.now}
        self.dialect.work(lambda tx: tx.exec("schedule_save", args), durable=True)

    def schedule_declare(self, names: Sequence[str], now: float) -> None:
        if names:
            self.dialect.work(lambda tx: tx.exec("schedule_declare", {
                "names": list(names), "now": now}), durable=False)

    def schedule_list(self) -> list[ScheduleRow]:
        found = self.dialect.read(lambda tx: tx.run("schedule_list", {}))
        return [_row(r) for r in found]

    def schedule_fire(self, params: ScheduleFireParams) -> bool:
        def fire(tx: Tx) -> bool:
            with tx.atomic():
                if not tx.exec("schedule_fire", {
                        "name": params.name, "seen": params.seen, "slot": params.slot,
                        "now": params.now, "n": len(params.messages)}):
                    return False
                if params.messages:
                    self.dialect.insert(tx, params.messages)
                return True

        # A re-run after a lost connection finds last_slot moved if the first try
        # committed, and sends nothing again.
        return self.dialect.work(fire, durable=True, rerun=fire)

    def schedule_pause(self, name: str, paused: bool, now: float) -> bool:
        return bool(self.dialect.work(lambda tx: tx.exec("schedule_pause", {
            "name": name, "paused": paused, "now": now}), durable=True))

    def schedule_delete(self, name: str) -> bool:
        return bool(self.dialect.work(lambda tx: tx.exec("schedule_delete", {"name": name}),
                                      durable=True))


def _row(r: Any) -> ScheduleRow:
    (name, queue, cron, every, tz, catch_up, body, body_kind, headers, priority, source,
     paused, created_at, declared_at, last_slot, fired_at, fired) = r
    return ScheduleRow(str(name), str(queue), cron, None if every is None else float(every),
                       str(tz), int(catch_up), bytes(body), int(body_kind), headers,
                       int(priority), str(source), bool(paused), float(created_at),
                       float(declared_at), float(last_slot),
                       None if fired_at is None else float(fired_at), int(fired))

