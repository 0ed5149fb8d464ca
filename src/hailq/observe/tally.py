"""The recorder's folding (``hailq/observe/recorder.py``): a second's values per (queue,
priority) into Prometheus buckets, log-bucket sketches and the rate slot's figures, and
those into the rows one flush writes (``FiguresRecordParams``)."""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from typing import Any

from hailq.backends.base import (
    BucketAdd,
    FiguresRecordParams,
    RangeAdd,
    RateAdd,
    SketchAdd,
)
from hailq.observe import sketch


class Tally:
    """What one (queue, priority) saw since the last flush: Prometheus buckets and the
    log-bucket sketches of waits and handler times, and the rate slot's figures."""

    __slots__ = ("bounds", "handler", "handler_n", "handler_s", "rate", "target", "wait_n",
                 "wait_s", "wait_sketch")

    def __init__(self, bounds: tuple[float, ...], target: float | None) -> None:
        self.bounds, self.target = bounds, target
        # per bound of ``bounds``: observations and their sum
        self.wait_n, self.wait_s = [0] * len(bounds), [0.0] * len(bounds)
        self.handler_n, self.handler_s = [0] * len(bounds), [0.0] * len(bounds)
        self.wait_sketch = _Sketch()
        self.handler = _Sketch()
        # started, acked, failed, breaches, handler seconds, redelivered, inbox, late acks
        self.rate: list[float] = [0, 0, 0, 0, 0.0, 0, 0, 0]

    def waits(self, values: list[float], redelivered: int) -> None:
        self.wait_sketch.add(values, self.bounds, self.wait_n, self.wait_s)
        rate = self.rate
        rate[0] += len(values)
        target = self.target
        if target is not None:
            rate[3] += sum(1 for v in values if v > target)
        rate[5] += redelivered

    def ends(self, values: list[float], failed: int, inbox: int, late: int = 0) -> None:
        """``values``: handler times, the ``failed`` ones last; ``late`` acks came after
        their lease ended."""
        if values:
            self.handler.add(values, self.bounds, self.handler_n, self.handler_s)
        rate = self.rate
        rate[1] += len(values) - failed
        rate[2] += failed
        rate[4] += sum(values)
        rate[6] += inbox
        rate[7] += late


class _Sketch:
    """Log-bucket counts (``hailq/observe/sketch.py``) with count, sum, min and max."""

    __slots__ = ("counts", "hi", "lo", "n", "total")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.n, self.total, self.lo, self.hi = 0, 0.0, float("inf"), 0.0

    def add(self, values: list[float], bounds: tuple[float, ...], n: list[int],
            sums: list[float]) -> None:
        """Count ``values`` here, and in the Prometheus buckets of ``bounds`` (``n``,
        ``sums``): a log bucket with no bound inside goes whole into the Prometheus
        bucket of its largest value; the values of one with a bound inside (a target,
        say) are placed one by one, so a value on a bound is within it (``le``)."""
        indices = sketch.buckets(values)
        found = Counter(indices)
        counts = self.counts
        straddling = set()
        for index, k in found.items():
            counts[index] = counts.get(index, 0) + k
            low, high = sketch.span(index)
            first = bisect_left(bounds, low * (1 - 1e-9))
            if first == bisect_left(bounds, high * (1 + 1e-9)):
                n[first] += k
            else:
                straddling.add(index)
        if straddling:
            for v, index in zip(values, indices, strict=True):
                if index in straddling:
                    n[bisect_left(bounds, v)] += 1
        total = sum(values)
        sums[-1] += total  # only their sum is read (Prometheus' _sum), not per bucket
        self.n += len(values)
        self.total += total
        self.lo = min(self.lo, min(values))
        self.hi = max(self.hi, max(values))


def take(counted: dict[str, dict[int, deque[float]]]) -> dict[tuple[str, int], list[float]]:
    """Every value in ``counted``'s deques as of now, by (queue, priority), taken out."""
    out: dict[tuple[str, int], list[float]] = {}
    for queue, per in list(counted.items()):
        for priority, found in list(per.items()):
            if found:
                take = found.popleft
                out[queue, priority] = [take() for _ in range(len(found))]
    return out


def params(tallies: Mapping[tuple[str, int], Tally], sampled: list[str],
            unwritten: FiguresRecordParams | None) -> FiguresRecordParams:
    """One flush's rows, with those of a flush that failed before added in."""
    buckets: dict[tuple[str, str, int, float], list[float]] = {}
    rates: dict[tuple[str, int], list[float]] = {}
    sketches: dict[tuple[str, Any, int, int], int] = {}
    ranges: dict[tuple[str, str, int], list[float]] = {}
    if unwritten is not None:
        for b in unwritten.buckets:
            _add(buckets, (b.queue, b.kind, b.priority, b.le), [b.n, b.total])
        for r in unwritten.rates:
            _add(rates, (r.queue, r.priority), list(r[2:]))
        for k in unwritten.sketches:
            key = (k.queue, k.kind, k.priority, k.bucket)
            sketches[key] = sketches.get(key, 0) + k.n
        for g in unwritten.ranges:
            _range(ranges, (g.queue, g.kind, g.priority), g.n, g.total, g.lo, g.hi)
        sampled = sorted({*sampled, *unwritten.sampled})
    for (queue, priority), t in tallies.items():
        kinds: tuple[tuple[str, list[int], list[float], _Sketch], ...] = (
            ("wait", t.wait_n, t.wait_s, t.wait_sketch),
            ("handler", t.handler_n, t.handler_s, t.handler))
        for kind, counts, sums, sk in kinds:
            for le, n, total in zip(t.bounds, counts, sums, strict=True):
                if n or total:  # the sum rides on the last bucket
                    _add(buckets, (queue, kind, priority, le), [n, total])
            for index, n in sk.counts.items():
                cell = (queue, kind, priority, index)
                sketches[cell] = sketches.get(cell, 0) + n
            if sk.n:
                _range(ranges, (queue, kind, priority), sk.n, sk.total, sk.lo, sk.hi)
        if t.rate[6]:  # also all-time, beside the histograms (QueueFigures.inbox_runs)
            _add(buckets, (queue, "inbox", priority, 0.0), [t.rate[6], 0.0])
        _add(rates, (queue, priority), list(t.rate))
    return FiguresRecordParams(
        buckets=[BucketAdd(q, k, p, le, int(n), t)  # type: ignore[arg-type]
                 for (q, k, p, le), (n, t) in buckets.items()],
        rates=[RateAdd(q, p, int(s), int(a), int(f), int(b), h, int(r), int(i), int(la))
               for (q, p), (s, a, f, b, h, r, i, la) in rates.items()],
        sampled=sampled,
        sketches=[SketchAdd(q, k, p, index, n)
                  for (q, k, p, index), n in sketches.items()],
        ranges=[RangeAdd(q, k, p, int(n), t, lo, hi)  # type: ignore[arg-type]
                for (q, k, p), (n, t, lo, hi) in ranges.items()])


def _add(into: dict[Any, list[float]], key: Any, values: Sequence[float]) -> None:
    row = into.get(key)
    if row is None:
        into[key] = list(values)
    else:
        for i, v in enumerate(values):
            row[i] += v


def _range(into: dict[tuple[str, str, int], list[float]], key: tuple[str, str, int],
           n: int, total: float, lo: float, hi: float) -> None:
    row = into.get(key)
    if row is None:
        into[key] = [n, total, lo, hi]
    else:
        row[0] += n
        row[1] += total
        row[2] = min(row[2], lo)
        row[3] = max(row[3], hi)
