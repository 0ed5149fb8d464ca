"""The seam's parts for periodic schedules (rule 35), the overview (rule 25) and queue
levels over time: their params, rows and Protocols, which ``base.Backend`` includes.
They are implemented by ``schedules.py``, ``overview.py`` and ``levels.py`` (mixins of
``SqlBackend``); nothing here depends on an implementation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from hailq.backends.figure_rows import FigureRows
from hailq.models import QueueRecord

if TYPE_CHECKING:  # base.py includes these Protocols: no import of it at run time
    from hailq.backends.base import NewMessage

# -- periodic schedules ---------------------------------------------------------------------


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
class ScheduleRow(ScheduleDefinition):
    """A stored schedule as the database returned it."""

    paused: bool
    created_at: float
    declared_at: float
    last_slot: float
    fired_at: float | None
    fired: int


@dataclass(frozen=True, slots=True)
class ScheduleFireParams:
    name: str
    seen: float  # last_slot as the scheduler read it
    slot: float  # the newest slot it sends
    now: float
    messages: Sequence[NewMessage]  # one per slot


@dataclass(frozen=True, slots=True)
class ScheduleDeclareParams:
    names: Sequence[str]  # a running scheduler still declares these
    now: float


@dataclass(frozen=True, slots=True)
class SchedulePauseParams:
    name: str
    paused: bool
    now: float  # a resumed schedule goes on from here


@dataclass(frozen=True, slots=True)
class ScheduleDeleteParams:
    name: str


class ScheduleBackend(Protocol):
    """The schedules' part of the seam (``Backend`` has the rest)."""

    def schedule_save(self, params: ScheduleSaveParams) -> None:
        """Declare a schedule or update its definition; its last slot, pause and counts
        stay. A new one's last slot is ``params.now``: no slot before it fires."""
        ...

    def schedule_declare(self, params: ScheduleDeclareParams) -> None:
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

    def schedule_pause(self, params: SchedulePauseParams) -> bool:
        """Pause or resume; a resumed schedule goes on from ``now`` (the slots of its
        pause are not sent). False if there is no such schedule."""
        ...

    def schedule_delete(self, params: ScheduleDeleteParams) -> bool:
        """Forget a schedule; False if there was none."""
        ...


# -- the overview ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OverviewParams:
    limit: int  # counts stop past this many


@dataclass(frozen=True, slots=True)
class DeadCountParams:
    queue: str
    error_contains: str | None = None
    older_than: float | None = None
    limit: int = 10_000
    ordering_key: str | None = None


@dataclass(frozen=True)
class QueueGlanceRows:
    """One queue as the overview read it: its record, its figures' rows (stats with
    capped counts) and the names of the counts that reached the limit."""

    record: QueueRecord
    rows: FigureRows
    capped: frozenset[str]


class OverviewBackend(Protocol):
    """The overview's part of the seam (``Backend`` has the rest)."""

    def overview_read(self, params: OverviewParams) -> list[QueueGlanceRows]:
        """Every queue by name, in one snapshot: counts as ``queue_stats`` gives them but
        each stopping past ``params.limit``, the oldest ready message, the pause, and the
        stored figures (histograms, rates, samples). A read: it writes nothing."""
        ...

    def dead_count(self, params: DeadCountParams) -> int:
        """How many dead letters ``dead_list`` would list with these filters, counting
        up to ``params.limit + 1`` (more than the limit). A read."""
        ...


# -- queue levels over time ------------------------------------------------------------------

SLOT = 10.0  # seconds per recorded level
KEEP = 3900.0  # seconds levels are kept: the last hour, and a slot's margin
LIMIT = 100_000  # each count stops past this many messages (the row says it was capped)


@dataclass(frozen=True, slots=True)
class LevelsRecordParams:
    limit: int = LIMIT  # counts stop past this many
    keep: float = KEEP  # rows older than this many seconds are pruned


@dataclass(frozen=True, slots=True)
class LevelsReadParams:
    since: float  # broker clock: rows recorded at or after this
    queue: str | None = None  # one queue, or None for every queue


@dataclass(frozen=True, slots=True)
class LevelRow:
    """One queue's levels as recorded in one slot. ``acked`` is the queue's acked
    counter then (sent - present - purged), None where a count reached the limit."""

    queue: str
    at: float  # broker clock when counted
    ready: int
    in_flight: int
    delayed: int
    blocked: int
    dead: int
    sent: int
    acked: int | None
    capped: bool  # some count stopped at the limit: it reads as the limit


class LevelsBackend(Protocol):
    """The levels' part of the seam (``Backend`` has the rest)."""

    def levels_record(self, params: LevelsRecordParams) -> bool:
        """Count and store every queue's levels for the current slot, unless some
        process did already; prune rows past ``params.keep``. True if this call wrote."""
        ...

    def levels_read(self, params: LevelsReadParams) -> list[LevelRow]:
        """Recorded levels since ``params.since``, by queue then time. A read."""
        ...
