"""Fixed-bucket histograms: percentiles and service levels without scanning messages.

The bounds are OpenTelemetry's default buckets (5 ms ... 10 s, the Prometheus
client's too) extended to 10 minutes, plus each service-level target of the queue
(rule 25), so the share of messages within a target is exact, not interpolated.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

DEFAULT_BOUNDS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    30.0, 60.0, 120.0, 300.0, 600.0)


def bounds_for(slo: Mapping[int, float] | None) -> tuple[float, ...]:
    """The upper bounds of a queue's buckets, +Inf last: the defaults and its targets."""
    return (*sorted({*DEFAULT_BOUNDS, *(slo or {}).values()}), math.inf)


def bucket_index(bounds: tuple[float, ...], value: float) -> int:
    """The index in ``bounds`` of the bucket ``value`` falls in (a value equal to a bound
    is within it, as Prometheus' ``le`` says)."""
    return bisect_left(bounds, value)


def bucket_of(bounds: tuple[float, ...], value: float) -> float:
    """The upper bound of the bucket ``value`` falls in (see ``bucket_index``)."""
    return bounds[bucket_index(bounds, value)]


@dataclass(frozen=True)
class Histogram:
    """Observations per bucket: ``counts[i]`` fell in ``(bounds[i-1], bounds[i]]``."""

    bounds: tuple[float, ...]
    counts: tuple[int, ...]
    total: float

    @classmethod
    def of(cls, buckets: Iterable[tuple[float, int, float]],
           bounds: Iterable[float] = ()) -> Histogram:
        """From stored (le, n, total) rows (only buckets that saw something are stored)
        over ``bounds``, the queue's bucket bounds; buckets of bounds stored at different
        times (a target added later) simply sit side by side."""
        merged: dict[float, int] = dict.fromkeys(bounds, 0)
        total = 0.0
        for le, n, t in buckets:
            merged[le] = merged.get(le, 0) + n
            total += t
        merged.setdefault(math.inf, 0)
        bounds = tuple(sorted(merged))
        return cls(bounds, tuple(merged[b] for b in bounds), total)

    @property
    def count(self) -> int:
        return sum(self.counts)

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    def cumulative(self) -> list[tuple[float, int]]:
        """(le, observations <= le) per bound, +Inf last: Prometheus' buckets."""
        out, running = [], 0
        for bound, n in zip(self.bounds, self.counts, strict=True):
            running += n
            out.append((bound, running))
        return out

    def within(self, target: float) -> int:
        """Observations at most ``target`` (exact when ``target`` is a bound)."""
        return sum(n for bound, n in zip(self.bounds, self.counts, strict=True)
                   if bound <= target)

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile, interpolated linearly inside its bucket (as Prometheus'
        ``histogram_quantile``); the last finite bound for the +Inf bucket."""
        count = self.count
        if not count:
            return None
        rank = q * count
        below, lower = 0, 0.0
        for bound, n in zip(self.bounds, self.counts, strict=True):
            if n and below + n >= rank:
                if math.isinf(bound):
                    return lower
                return lower + (bound - lower) * max(rank - below, 0.0) / n
            below += n
            if not math.isinf(bound):
                lower = bound
        return lower
