"""The figures' rows at the storage seam (rules 25, 26, 36): what a process's recorder
writes once a second (``figures_record``) and what reads return (``figures_read``,
``figures_window``). Re-exported by ``hailq/backends/base.py``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Literal, NamedTuple

from hailq.models import QueueStats


class BucketAdd(NamedTuple):
    """One all-time histogram bucket grows (Prometheus' ``hailq_wait_seconds``): ``n`` more
    observations summing ``total`` seconds."""

    queue: str
    kind: Literal["wait", "handler", "inbox"]  # inbox: runs whose handler used one (le 0)
    priority: int
    le: float  # the bucket's upper bound; math.inf for the last
    n: int
    total: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RateCounts:
    """A queue's priority's counters over some span, as written (``RateAdd``) and as
    stored per slot (``RateSlot``): ``started`` claims (``redelivered`` of them on attempt
    2 or later, ``breaches`` of them waited past the priority's target), ``acked`` and
    ``failed`` ends of handling with their ``handler_total`` seconds, ``inbox`` handler
    runs that used an inbox or an ack transaction, ``late_acks`` acks that came after
    their lease ended (rule 26). Keyword-only, each 0 unless given: eight counters in a
    row read best named."""

    priority: int
    started: int = 0
    acked: int = 0
    failed: int = 0
    breaches: int = 0
    handler_total: float = 0.0
    redelivered: int = 0
    inbox: int = 0
    late_acks: int = 0

    def counters(self) -> list[float]:
        """The counters in field order (``priority`` is not one)."""
        return [getattr(self, f.name) for f in fields(RateCounts)[1:]]


@dataclass(frozen=True, slots=True, kw_only=True)
class RateAdd(RateCounts):
    """What one process saw of ``queue``'s priority since its last flush (rules 25, 26,
    36); the database adds it to the current slot."""

    queue: str


class SketchAdd(NamedTuple):
    """One bucket of a log-bucket sketch (``hailq/observe/sketch.py``) grows by ``n`` in
    the current slot."""

    queue: str
    kind: Literal["wait", "handler"]
    priority: int
    bucket: int
    n: int


class RangeAdd(NamedTuple):
    """A sketch's count, sum, minimum and maximum in the current slot grow by these."""

    queue: str
    kind: Literal["wait", "handler"]
    priority: int
    n: int
    total: float
    lo: float
    hi: float


@dataclass(frozen=True, slots=True)
class FiguresRecordParams:
    """A process's figures since its last flush, written in one transaction; ``sampled``
    queues get their counters sampled (sends, acks, deaths: rates over one span)."""

    buckets: Sequence[BucketAdd] = ()
    rates: Sequence[RateAdd] = ()
    sampled: Sequence[str] = ()
    sketches: Sequence[SketchAdd] = ()
    ranges: Sequence[RangeAdd] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class RateSlot(RateCounts):
    """One stored 10-second slot of a queue's priority (``figures_window``): ``slot`` is
    its start in seconds on the broker's clock (a multiple of 10)."""

    slot: float


class SketchRow(NamedTuple):
    """A sketch bucket summed over the slots of a window (0: the short, 1: the long)."""

    window: int
    kind: str
    priority: int
    bucket: int
    n: int


class RangeRow(NamedTuple):
    """A sketch's count, sum, minimum and maximum over the slots of a window."""

    window: int
    kind: str
    priority: int
    n: int
    total: float
    lo: float
    hi: float


class Point(NamedTuple):
    """A sample of a queue's counters as of ``at`` (broker clock): for the rate window of
    ``window`` seconds, the last one at or before its start (``after`` 0) or the first one
    after it (``after`` 1)."""

    window: float
    after: int
    at: float
    sent: int
    dead_lettered: int
    acked: int


@dataclass(frozen=True, slots=True)
class FigureRows:
    """A queue's stored figures as read in one snapshot with its stats: all-time
    histogram buckets (Prometheus), the rate slots and sketches of the last hour, the
    counter samples rates start from, the queue's creation time and its acks so far
    (``hailq/observe/figures.py`` makes them figures)."""

    stats: QueueStats
    now: float
    buckets: list[tuple[str, int, float, int, float]]  # kind, priority, le, n, total
    rates: list[RateSlot]
    sketches: list[SketchRow] = field(default_factory=list)
    ranges: list[RangeRow] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)
    created_at: float | None = None
    acked: int = 0  # hailq_counters.acked: the acks recorders have flushed
    # A queue in deadline order (rule 41): its first ready messages in delivery order,
    # (priority, available_at, ordering key), to size its pool; None: not read.
    ready_first: list[tuple[int, float, str | None]] | None = None
    # Sends per slot and priority over the last hour (rule 41's arrival rates): (the
    # slot's start in seconds, priority, messages sent).
    sends: list[tuple[float, int, int]] = field(default_factory=list)


class FiguresReadParams(NamedTuple):
    queue: str


class FiguresWindowParams(NamedTuple):
    """The rate slots of ``queue`` from the one holding ``since`` (seconds on the broker's
    clock) on; slots are kept a day."""

    queue: str
    since: float
