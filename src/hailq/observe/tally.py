"""The recorder's folding (``hailq/observe/recorder.py``): a second's values per (queue,
priority) into Prometheus buckets, log-bucket sketches and the rate slot's figures, and
those into the rows one flush writes (``FiguresRecordParams``).

Consumers put a few values per message in flat lists; ``fold`` splits them into
columns and groups them by (queue, priority) in C (a pass per distinct key, none where
there is one), and each group's values are counted with one sort and a step per
distinct log bucket (``_Sketch.add``): nothing in Python runs per value. Each log bucket
goes whole into one Prometheus bucket (a cached table per set of bounds and target) but
the one holding the target, split at it. Breaches are read off the Prometheus counts:
the target is a bound."""

from __future__ import annotations

import operator
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping, Sequence
from itertools import compress, repeat
from typing import Any, TypeVar

from hailq.backends.base import (
    BucketAdd,
    FiguresRecordParams,
    RangeAdd,
    RateAdd,
    SketchAdd,
)
from hailq.ids import receipt_claim
from hailq.observe import sketch
from hailq.observe.histogram import bounds_for

Slo = Mapping[int, float] | None
# What a consumer puts in the recorder's flat lists (hailq/observe/recorder.py), so many
# values per message:
CLAIM = 5  # queue, its targets, priority, wait (s), attempt (1 the first)
ACK = 4  # an ack in time or late of a Message, no inbox: its Queue, priority, handler
#          time (below zero: 0, see _Sketch), the ack's result (False in time, True
#          late): folded in C
SETTLED = 7  # any other ack or nack: the Queue, the priority or a receipt (read here),
#              claim time or None, end, ok, inbox, result: folded one by one
HANDLED = 6  # a whole handler time: queue, targets, priority, seconds, ok, inbox
INBOX = 3  # an inbox run: queue, targets, priority
T = TypeVar("T")


def taken(items: list[T]) -> list[T]:
    """The values put in so far, taken out; values racing this land after them and stay
    (two calls, each atomic under the GIL: consumers extend the same list)."""
    n = len(items)
    out = items[:n]
    del items[:n]
    return out


def _columns(flat: list[Any], size: int) -> list[list[Any]]:
    return [flat[i::size] for i in range(size)]


def _split(first: list[Any], second: list[Any], *columns: list[Any],
           ) -> Iterator[tuple[Any, Any, list[list[Any]]]]:
    """Each distinct (first, second) with the values of ``columns`` at its places: in C,
    a pass per distinct value, and none where there is one (one queue, one priority)."""
    for a, (seconds, *rest) in _by(first, second, *columns):
        for b, values in _by(seconds, *rest):
            yield a, b, values


def _by(keys: list[Any], *columns: list[Any]) -> Iterator[tuple[Any, list[list[Any]]]]:
    if keys.count(keys[0]) == len(keys):  # one key: in C, by identity mostly
        yield keys[0], list(columns)
        return
    for key in dict.fromkeys(keys):
        chosen = list(map(operator.eq, keys, repeat(key)))  # a Queue: the same one
        yield key, [list(compress(c, chosen)) for c in columns]


class _Group:
    """One (queue, priority)'s values of one flush, before they become a ``Tally``."""

    __slots__ = ("again", "failed", "inbox", "late", "ok", "waits")

    def __init__(self) -> None:
        self.waits: list[float] = []
        self.ok: list[float] = []
        self.failed: list[float] = []
        self.again = self.inbox = self.late = 0


def fold(claims: list[Any], acks: list[Any], settled: list[Any], handled: list[Any],
         inboxes: list[Any], slos: dict[str, Slo]) -> dict[tuple[str, int], Tally]:
    """Consumers' values as tallies per (queue, priority), column by column where they
    come in numbers; ``slos`` is updated with each queue's targets as last counted."""
    groups: dict[tuple[str, int], _Group] = {}

    def group(queue: str, priority: int) -> _Group:
        found = groups.get((queue, priority))
        if found is None:
            found = groups[queue, priority] = _Group()
        return found

    if claims:
        queues, targets, priorities, waits, attempts = _columns(claims, CLAIM)
        for queue, priority, (t, w, a) in _split(queues, priorities, targets, waits,
                                                 attempts):
            slos[queue] = t[-1]  # its targets as last counted
            g = group(queue, priority)
            g.waits += w
            g.again += len(a) - a.count(1)  # redeliveries: every attempt after the first
    if acks:
        sources, priorities, handler, results = _columns(acks, ACK)
        for source, priority, (h, r) in _split(sources, priorities, handler, results):
            slos[source.name] = source.settings.slo
            g = group(source.name, priority)
            g.ok += h
            g.late += r.count(True)  # acked after its lease ended (rule 26)
    for source, of, began, end, ok, inbox, result in _each(settled, SETTLED):
        if type(of) is str:  # a receipt: its priority and claim time are in it
            claim = receipt_claim(of)
            if claim is None:
                continue  # a receipt made before claims were written in it
            priority, began = claim
        elif began is None:
            continue  # a message whose claim time is not known
        else:
            priority = of
        slos[source.name] = source.settings.slo
        _ended(group(source.name, priority), end - began, ok, inbox, result)
    for queue, slo, priority, seconds, ok, inbox in _each(handled, HANDLED):
        slos[queue] = slo
        _ended(group(queue, priority), seconds, ok, inbox, False)
    for queue, slo, priority in _each(inboxes, INBOX):
        slos[queue] = slo
        group(queue, priority).inbox += 1
    tallies: dict[tuple[str, int], Tally] = {}
    for key, g in groups.items():
        slo = slos.get(key[0])
        tally = tallies[key] = Tally(bounds_for(slo), None if slo is None else slo.get(key[1]))
        if g.waits:
            tally.waits(g.waits, g.again)
        tally.ends(g.ok + g.failed if g.failed else g.ok, len(g.failed), g.inbox, g.late)
    return tallies


def _ended(g: _Group, handler: float, ok: bool, inbox: bool, result: object) -> None:
    if ok:
        g.ok.append(handler)
        if result is True:  # acked after its lease ended (rule 26)
            g.late += 1
    else:
        g.failed.append(handler)
    if inbox:
        g.inbox += 1


def _each(flat: list[Any], size: int) -> Iterator[tuple[Any, ...]]:
    """``flat`` in tuples of ``size`` values, made by ``zip`` (no Python per tuple)."""
    it = iter(flat)
    return zip(*[it] * size, strict=False)


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
        rate = self.rate
        target, bounds = self.target, self.bounds
        if target is not None and target in bounds:
            # values over the target: those in the buckets past the target's bound
            past = bounds.index(target) + 1
            before = sum(self.wait_n[past:])
            self.wait_sketch.add(values, bounds, self.wait_n, self.wait_s, target)
            rate[3] += sum(self.wait_n[past:]) - before
        else:
            self.wait_sketch.add(values, bounds, self.wait_n, self.wait_s, None)
            if target is not None:
                rate[3] += sum(map(operator.gt, values, repeat(target)))
        rate[0] += len(values)
        rate[5] += redelivered

    def ends(self, values: list[float], failed: int, inbox: int, late: int = 0) -> None:
        """``values``: handler times, the ``failed`` ones last; ``late`` acks came after
        their lease ended."""
        rate = self.rate
        if values:
            self.handler.add(values, self.bounds, self.handler_n, self.handler_s, None)
            rate[4] += self.handler.last
        rate[1] += len(values) - failed
        rate[2] += failed
        rate[6] += inbox
        rate[7] += late


# Per set of Prometheus bounds and target: each log bucket's Prometheus bucket, -1 where
# the target falls inside it (its values are then placed one by one). Bounded: a few sets
# of bounds (the defaults with each queue's targets) times the log buckets seen.
_PLACES: dict[tuple[tuple[float, ...], float | None], dict[int, int]] = {}


def _place(bounds: tuple[float, ...], target: float | None, index: int) -> int:
    """Where log bucket ``index`` goes whole: the Prometheus bucket of its largest value,
    so that no value is counted below its own bucket (one within 4 % above a default
    bound is counted in the next: the default bounds are a scale, not a promise); -1
    where ``target`` lies inside it, within rounding: a target's share is exact."""
    low, high = sketch.span(index)
    if target is not None and low * (1 - 1e-9) < target <= high * (1 + 1e-9):
        return -1
    return bisect_left(bounds, high)


class _Sketch:
    """Log-bucket counts (``hailq/observe/sketch.py``) with count, sum, min and max."""

    __slots__ = ("counts", "hi", "last", "lo", "n", "total")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.n, self.total, self.lo, self.hi = 0, 0.0, float("inf"), 0.0
        self.last = 0.0  # the sum of the values of the last ``add``

    def add(self, values: list[float], bounds: tuple[float, ...], n: list[int],
            sums: list[float], target: float | None) -> None:
        """Count ``values`` here, and in the Prometheus buckets of ``bounds`` (``n``,
        ``sums``): a log bucket goes whole into the Prometheus bucket of its largest
        value (``_place``), but the one with ``target`` inside is split at the target,
        so a value on the target is within it (``le``).

        One sort (in C, and next to free for waits, which come about in order) and then
        a step per distinct log bucket, not per value: its first value names it, a
        bisection finds where it ends."""
        values = sorted(values)
        total = sum(values)
        if total != total:  # a NaN (no clock gives one): counted as 0, as sketch.bucket
            values = sorted(v if v == v else 0.0 for v in values)
            total = sum(values)
        if values[0] < 0.0:  # clocks apart: no wait or handler time is below zero
            values = [v if v > 0.0 else 0.0 for v in values]
            total = sum(values)
        counts = self.counts
        places = _PLACES.get((bounds, target))
        if places is None:
            places = _PLACES[bounds, target] = {}
        bucket, upper = sketch.bucket, sketch.upper
        at, size = 0, len(values)
        while at < size:
            index = bucket(values[at])
            end = max(bisect_right(values, upper(index), at), at + 1)  # at least this one
            k = end - at
            counts[index] = counts.get(index, 0) + k
            place = places.get(index)
            if place is None:
                place = places[index] = _place(bounds, target, index)
            if place >= 0 or target is None:
                n[place] += k
            else:  # the target inside: those up to it within its bucket, the rest above
                within = bisect_right(values, target, at, end) - at
                n[bisect_left(bounds, target)] += within
                n[bisect_left(bounds, upper(index))] += k - within
            at = end
        self.last = total
        sums[-1] += total  # only their sum is read (Prometheus' _sum), not per bucket
        self.n += size
        self.total += total
        if values[0] < self.lo:
            self.lo = values[0]
        if values[-1] > self.hi:
            self.hi = values[-1]


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
            _add(rates, (r.queue, r.priority), r.counters())
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
        rates=[RateAdd(queue=q, priority=p, started=int(s), acked=int(a), failed=int(f),
                       breaches=int(b), handler_total=h, redelivered=int(r), inbox=int(i),
                       late_acks=int(la))
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
