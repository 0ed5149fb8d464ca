"""The figures' rows at the storage seam (rules 25, 26, 36): what a process's recorder
writes once a second (``figures_record``) and what reads return (``figures_read``,
``figures_window``). Re-exported by ``hailq/backends/base.py``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
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


class RateAdd(NamedTuple):
    """What one process saw of a queue's priority since its last flush (rules 25, 26, 36):
    ``started`` claims (``redelivered`` of them on attempt 2 or later, ``breaches`` of them
    waited past the priority's target), ``acked`` and ``failed`` ends of handling with
    their ``handler_total`` seconds, ``inbox`` handler runs that used an inbox or an ack
    transaction."""

    queue: str
    priority: int
    started: int
    acked: int
    failed: int
    breaches: int
    handler_total: float
    redelivered: int = 0
    inbox: int = 0
    late_acks: int = 0  # acks that came after their lease ended (rule 26)


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


class RateSlot(NamedTuple):
    """One stored 10-second slot of a queue's priority (``figures_window``). ``slot``: the
    slot's start in seconds on the broker's clock (a multiple of 10). ``started``: claims;
    ``acked``/``failed``: handler runs ended so; ``breaches``: claims that waited past the
    priority's target; ``handler_total``: seconds of the runs ended; ``redelivered``:
    claims on attempt 2 or later; ``inbox``: handler runs that used an inbox or an ack
    transaction."""

    slot: float
    priority: int
    started: int
    acked: int
    failed: int
    breaches: int
    handler_total: float
    redelivered: int
    inbox: int
    late_acks: int = 0  # acks that came after their lease ended


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
