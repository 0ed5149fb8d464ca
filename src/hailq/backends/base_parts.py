"""The seam's parts for periodic schedules (rule 35), the overview (rule 25), queue
levels over time, history (rule 40) and maintenance duties: their params, rows and
Protocols, which ``base.Backend`` includes. They are implemented by ``schedules.py``,
``overview.py``, ``levels.py``, ``history.py`` and ``upkeep.py`` (parts of
``SqlBackend``); nothing here depends on an implementation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from hailq.backends.figure_rows import FigureRows
from hailq.models import QueueRecord

if TYPE_CHECKING:  # base.py includes these Protocols: no import of it at run time
    from hailq.backends.base import NewMessage
    from hailq.history import HistoryEntry, HistoryQuery

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


# -- history (rule 40) ---------------------------------------------------------------------

PRUNE_BATCH = 500  # rows per prune transaction
SETTLE_BATCH = 500  # fresh history rows claim-time upkeep moves at a time (SQLite)


@dataclass(frozen=True, slots=True)
class HistoryPruneParams:
    queue: str
    keep: float  # seconds: rows that finished longer ago go
    batch: int = PRUNE_BATCH


@dataclass(frozen=True, slots=True)
class HistorySettleParams:
    batch: int = SETTLE_BATCH


class HistoryBackend(Protocol):
    def history_search(self, query: HistoryQuery) -> list[HistoryEntry]:
        """Finished messages matching every filter of ``query``, newest first."""
        ...

    def history_prune(self, params: HistoryPruneParams) -> int:
        """Delete one batch of a queue's history rows older than ``keep``; how many."""
        ...

    def history_settle(self, params: HistorySettleParams) -> int:
        """Move one batch of the history rows acks wrote unindexed into the indexed
        table (SQLite); how many (0 where the storage writes them there at once)."""
        ...


# -- maintenance duties --------------------------------------------------------------------

LIMIT = 5000  # rows one statement deletes at most
ROUNDS = 20  # statements of one kind per turn; what is left waits for the next turn


@dataclass(frozen=True, slots=True)
class PruneParams:
    duty: str  # a key of upkeep.PRUNES
    keep: float = 0.0  # seconds rows are kept, where the statement asks
    limit: int = LIMIT  # rows one statement deletes at most
    rounds: int = ROUNDS  # statements of one kind at most


@dataclass(frozen=True, slots=True)
class DeadlinePool:
    """The smallest pool that meets every target of a queue in deadline order (rule 41),
    before any autoscaler's saturation point: ``QueueFigures.deadline_pool``."""

    queue: str
    workers: int
    reason: str | None  # why no pool meets every target; None: one does


@dataclass(frozen=True, slots=True)
class DeadlinePoolsParams:
    pools: Sequence[DeadlinePool]


@dataclass(frozen=True, slots=True)
class MaintenanceClaimParams:
    duty: str  # a key of upkeep.PRUNES, or another duty's name
    every: float  # seconds until its next turn


@dataclass(frozen=True, slots=True)
class Turn:
    """A duty's row in the maintenance table."""

    duty: str
    next_due: float  # broker clock
    ran_at: float
    ran_by: str
    runs: int


class UpkeepBackend(Protocol):
    """The maintenance part of the seam (``Backend`` has the rest)."""

    def maintenance_claim(self, params: MaintenanceClaimParams) -> bool:
        """Take ``params.duty``'s turn if it is due (and make the next due ``every``
        seconds on); False if another process has it. A write."""
        ...

    def maintenance_prune(self, params: PruneParams) -> int:
        """Run one duty's statements in bounded batches; how many rows went."""
        ...

    def maintenance_list(self) -> list[Turn]:
        """Every duty's row: who ran it last and how often. A read."""
        ...

    def deadline_pools_kept(self) -> bool:
        """Whether this storage keeps the pools of queues in deadline order for a reader
        in SQL (PostgreSQL's ``desired_workers`` view); the duty skips where not."""
        ...

    def deadline_pools_save(self, params: DeadlinePoolsParams) -> None:
        """Store each queue's pool as ``Queue.figures()`` found it (rule 41). A write."""
        ...
