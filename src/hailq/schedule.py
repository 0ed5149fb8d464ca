"""Periodic messages (SPEC rule 35): a schedule's declaration and its stored form.

``Periodic`` is what ``app.periodic(...)`` and ``broker.schedule(...)`` declare,
validated once (bad values raise InvalidArgument before anything is written). Its
identity is its name: declaring the same name again updates the definition and
keeps the last slot sent. The scheduler (``hailq.runtime.scheduler``) sends the
due slots; ``docs/guides/periodic.md`` tells the whole story.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hailq._time import Duration, seconds
from hailq.backends.base import NewMessage, ScheduleFireParams, ScheduleRow, ScheduleSaveParams
from hailq.codec import Body, decode_body, decode_headers, encode_body, encode_headers
from hailq.errors import InvalidArgument
from hailq.ids import new_message_id
from hailq.models import ScheduleInfo
from hailq.policy import slots
from hailq.settings import MIB, check_name

# An "app" schedule that no running scheduler declared for this long is "not declared by
# any running worker": it is kept (with its last slot) but not sent until a scheduler
# declares it again or an operator removes it. Schedulers declare theirs every
# DECLARE_EVERY seconds.
DECLARED_FOR = 300.0
DECLARE_EVERY = 60.0
MAX_CATCH_UP = 1000
SLOT_HEADER = "hailq-slot"  # the slot a periodic message was sent for, ISO 8601 in UTC
SCHEDULE_HEADER = "hailq-schedule"  # the schedule's name


@dataclass(frozen=True)
class Periodic:
    """One periodic message: send ``body`` to ``queue`` at every slot of ``cron`` (in
    ``timezone``) or every ``every`` seconds."""

    queue: str
    body: Body
    cron: str | None = None
    every: float | None = None
    name: str = ""
    timezone: str = "UTC"
    catch_up: int = 0
    headers: dict[str, str] | None = None
    priority: int = 0
    _encoded: tuple[bytes, int, str | None] = field(default=(b"", 0, None), repr=False,
                                                    compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        check_name(self.queue)
        if (self.cron is None) == (self.every is None):
            raise InvalidArgument("give a cron expression or every=SECONDS, one of them")
        if self.cron is not None:
            slots.check_cron(self.cron)
        else:
            set_(self, "every", seconds(self.every, "every", allow_zero=False,
                                        maximum=366 * 86400))
            if self.every is not None and self.every < 1:
                raise InvalidArgument(f"every must be at least 1 second, got {self.every!r}")
        slots.zone(self.timezone)
        if isinstance(self.catch_up, bool) or not isinstance(self.catch_up, int) \
                or not 0 <= self.catch_up <= MAX_CATCH_UP:
            raise InvalidArgument(f"catch_up must be an integer from 0 to {MAX_CATCH_UP}, "
                                  f"got {self.catch_up!r}")
        if isinstance(self.priority, bool) or not isinstance(self.priority, int) \
                or not 0 <= self.priority <= 9:
            raise InvalidArgument(f"priority must be an integer from 0 to 9, "
                                  f"got {self.priority!r}")
        if not self.name:
            when = self.cron if self.cron is not None else f"every {self.every:g}s"
            set_(self, "name", f"{self.queue} {when}")
        if not isinstance(self.name, str) or not 1 <= len(self.name) <= 200 \
                or not self.name.isprintable():
            raise InvalidArgument(f"a schedule's name must be 1-200 printable characters, "
                                  f"got {self.name!r}")
        data, kind = encode_body(self.body, MIB)
        set_(self, "_encoded", (data, kind, encode_headers(self.headers)))

    def save_params(self, source: str, now: float) -> ScheduleSaveParams:
        data, kind, headers = self._encoded
        return ScheduleSaveParams(
            name=self.name, queue=self.queue, cron=self.cron, every=self.every,
            timezone=self.timezone, catch_up=self.catch_up, body=data, body_kind=kind,
            headers=headers, priority=self.priority, source=source, now=now)


def periodic(cron: str | None = None, *, every: Duration | None = None, queue: str,
             body: Body, name: str | None = None, timezone: str = "UTC",
             catch_up: int = 0, headers: dict[str, str] | None = None,
             priority: int = 0) -> Periodic:
    """A validated ``Periodic`` from the public arguments."""
    return Periodic(queue=queue, body=body, cron=cron,
                    every=None if every is None else seconds(every, "every"),
                    name=name or "", timezone=timezone, catch_up=catch_up,
                    headers=headers, priority=priority)


def is_declared(row: ScheduleRow | ScheduleInfo, now: float) -> bool:
    """Whether a scheduler sends it: made by broker.schedule, or an app's schedule that a
    running scheduler declared within DECLARED_FOR seconds."""
    return row.source != "app" or row.declared_at >= now - DECLARED_FOR


def fire_params(schedule: ScheduleInfo, due: Sequence[float], now: float,
                ) -> ScheduleFireParams:
    """One message per slot of ``due`` (oldest first), with the schedule's name and the
    slot in headers, claimed from the last slot ``schedule`` was read with."""
    data, kind = encode_body(schedule.body, MIB)
    messages = [NewMessage(
        queue=schedule.queue, id=new_message_id(), body=data, body_kind=kind,
        headers=encode_headers({**schedule.headers, SCHEDULE_HEADER: schedule.name,
                                SLOT_HEADER: slot_text(slot)}),
        priority=schedule.priority, ordering_key=None, delay=0.0, dedup_id=None)
        for slot in due]
    return ScheduleFireParams(schedule.name, schedule.last_slot, due[-1], now, messages)


def slot_text(slot: float) -> str:
    """A slot as its messages' ``hailq-slot`` header says it: ISO 8601 in UTC."""
    return datetime.fromtimestamp(slot, UTC).isoformat()


def info(row: ScheduleRow, now: float) -> ScheduleInfo:
    declared = is_declared(row, now)
    upcoming = None
    if declared and not row.paused:
        upcoming = slots.next_slot(row.cron, row.every, row.timezone,
                                   max(row.last_slot, now))
    body: Any = decode_body(row.body, row.body_kind)
    return ScheduleInfo(
        name=row.name, queue=row.queue, cron=row.cron, every=row.every,
        timezone=row.timezone, catch_up=row.catch_up, body=body,
        headers=decode_headers(row.headers), priority=row.priority, source=row.source,
        paused=row.paused, created_at=row.created_at, declared_at=row.declared_at,
        last_slot=row.last_slot, fired_at=row.fired_at, fired=row.fired,
        declared=declared, next_slot=upcoming)
