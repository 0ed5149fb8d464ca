"""Percentiles with a bounded error (SPEC rule 36): log-bucket sketches.

A value ``v`` falls in bucket ``i = ceil(log(v) / log(gamma))`` with ``gamma =
(1 + ALPHA) / (1 - ALPHA)``, so a bucket spans ``(gamma**(i-1), gamma**i]`` and its
representative ``2 * gamma**i / (gamma + 1)`` is within ``ALPHA`` (2 %) of every value in
it: DDSketch's mapping (Masson et al., VLDB 2019). Values of at most 1 ms share one
bucket below 1 ms, whose representative is within 1 ms of each of them. Buckets are
counts, so sketches of different slots and processes merge by adding them; the stored
minimum and maximum of each slot clamp a percentile into the observed range.

A percentile is the nearest rank, the ``ceil(q * n)``-th smallest value: the bucket
holding that rank is the one whose cumulative count first reaches it, and the value
reported is its representative clamped to ``[min, max]``. Against the exact percentile of
the same values the error is at most 2 % (or 1 ms below 1 ms), within rule 36's 5 %.
About 460 buckets span 1 ms to a day; a slot stores only those that saw a value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

ALPHA = 0.02  # relative accuracy of a bucket's representative
GAMMA = (1 + ALPHA) / (1 - ALPHA)
# log2, not log: the same buckets (but for a value within a rounding of an edge), and a
# cheaper call (one per distinct bucket of each flush)
_LOG_GAMMA = math.log2(GAMMA)
FLOOR = 0.001  # values up to 1 ms share one bucket
LOW = math.floor(math.log2(FLOOR) / _LOG_GAMMA)  # that bucket: gamma**LOW <= 1 ms
_CEILING = 1e9  # seconds (31 years): larger values are counted as this


def bucket(value: float) -> int:
    """The bucket of ``value`` seconds (at most 1 ms, negative or NaN: the low bucket)."""
    if not value > FLOOR:
        return LOW
    return math.ceil(math.log2(min(value, _CEILING)) * _INVERSE)


_INVERSE = 1.0 / _LOG_GAMMA
_TOP = math.ceil(math.log2(_CEILING) * _INVERSE)  # the bucket of the largest values


def _edge(index: int) -> float:
    """The largest value ``bucket`` puts in bucket ``index``: ``GAMMA ** index``, moved
    by a rounding or two where the logarithm rounds the other way."""
    edge = GAMMA ** index
    while bucket(edge) > index:
        edge = math.nextafter(edge, 0.0)
    while bucket(math.nextafter(edge, math.inf)) <= index:
        edge = math.nextafter(edge, math.inf)
    return edge


_UPPER = [FLOOR, *(_edge(i) for i in range(LOW + 1, _TOP)), math.inf]


def upper(index: int) -> float:
    """The largest value bucket ``index`` holds (the buckets' edges, computed once)."""
    return _UPPER[min(max(index, LOW), _TOP) - LOW]


def span(index: int) -> tuple[float, float]:
    """The values a bucket holds: more than the first, at most the second."""
    if index <= LOW:
        return -math.inf, FLOOR
    return GAMMA ** (index - 1), GAMMA ** index


def representative(index: int) -> float:
    """The value a bucket stands for: within ``ALPHA`` of each value in it."""
    return 2.0 * GAMMA ** index / (GAMMA + 1.0)


def rank(q: float, n: int) -> int:
    """The nearest rank ``ceil(q * n)`` computed exactly (0.95 * 100 is 95, not 96), at
    least 1."""
    exact = Fraction(str(q)) * n
    return max(math.ceil(exact), 1)


@dataclass(frozen=True)
class Sketch:
    """Counts per bucket of one window's values, with their count, sum and range."""

    counts: Mapping[int, int]
    n: int
    total: float
    lo: float | None
    hi: float | None

    @classmethod
    def merge(cls, buckets: Iterable[tuple[int, int]],
              ranges: Iterable[tuple[int, float, float, float]]) -> Sketch:
        """From stored (bucket, n) rows and (n, total, min, max) rows of the slots of one
        window (any number of processes' flushes each)."""
        counts: dict[int, int] = {}
        for index, n in buckets:
            counts[index] = counts.get(index, 0) + n
        total_n, total, lo, hi = 0, 0.0, math.inf, -math.inf
        for n, t, low, high in ranges:
            total_n += n
            total += t
            lo, hi = min(lo, low), max(hi, high)
        if not total_n:
            total_n = sum(counts.values())
        return cls(counts, total_n, total, lo if total_n and lo <= hi else None,
                   hi if total_n and lo <= hi else None)

    @property
    def mean(self) -> float | None:
        return self.total / self.n if self.n else None

    def quantile(self, q: float) -> float | None:
        """The nearest-rank ``q`` percentile (see the module's text), None when empty."""
        seen = sum(self.counts.values())
        if not seen:
            return None
        wanted = rank(q, seen)
        running = 0
        for index in sorted(self.counts):
            running += self.counts[index]
            if running >= wanted:
                value = representative(index)
                if self.lo is not None and value < self.lo:
                    value = self.lo
                if self.hi is not None and value > self.hi:
                    value = self.hi
                return value
        return self.hi  # not reached: the counts add up to ``seen``


def exact_percentile(values: Iterable[float], q: float) -> float:
    """The exact nearest-rank percentile (tests and ``hailq bench`` compare with it)."""
    ordered = sorted(values)
    return ordered[rank(q, len(ordered)) - 1]
