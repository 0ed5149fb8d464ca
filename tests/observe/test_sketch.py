"""Rule 36's error bound, as a property: for any values from 1 ms to a day -- uniform,
bimodal, heavy-tailed -- and however they are split into slots and merged, each
reported percentile is within 2 % (or 1 ms) of the exact nearest-rank percentile of the
same values (rule 36 allows 5 %) and never outside the observed minimum and maximum."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from hailq.observe import sketch
from hailq.observe.sketch import Sketch, exact_percentile, rank

QUANTILES = (0.5, 0.9, 0.95, 0.99, 0.999)
DAY = 86400.0


def uniform(r: random.Random, n: int) -> list[float]:
    low = 10 ** r.uniform(-3, 4)
    return [r.uniform(low, min(low * r.uniform(1.01, 1000), DAY)) for _ in range(n)]


def bimodal(r: random.Random, n: int) -> list[float]:
    fast, slow = 10 ** r.uniform(-3, 0), 10 ** r.uniform(0, 4.5)
    return [min(max(r.gauss(fast if r.random() < 0.8 else slow, fast / 5), 0.001), DAY)
            for _ in range(n)]


def heavy_tailed(r: random.Random, n: int) -> list[float]:
    scale, alpha = 10 ** r.uniform(-3, 1), r.uniform(0.5, 3.0)
    return [min(scale * r.paretovariate(alpha), DAY) for _ in range(n)]


def sketched(values: list[float], slots: int, r: random.Random) -> Sketch:
    """The values counted in ``slots`` slots (as flushes store them), then merged."""
    parts: list[list[float]] = [[] for _ in range(slots)]
    for v in values:
        parts[r.randrange(slots)].append(v)
    buckets: dict[int, int] = {}
    ranges = []
    for part in parts:
        for v in part:
            index = sketch.bucket(v)
            buckets[index] = buckets.get(index, 0) + 1
        if part:
            ranges.append((len(part), sum(part), min(part), max(part)))
    return Sketch.merge(buckets.items(), ranges)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from([uniform, bimodal, heavy_tailed]),
       n=st.integers(min_value=1, max_value=3000), seed=st.integers(0, 2**32 - 1),
       slots=st.integers(min_value=1, max_value=40))
def test_rule_36_percentiles_are_within_the_bound_and_the_observed_range(
        kind: object, n: int, seed: int, slots: int) -> None:
    r = random.Random(seed)
    values = kind(r, n)  # type: ignore[operator]
    found = sketched(values, slots, r)
    assert found.n == n and found.lo == min(values) and found.hi == max(values)
    for q in QUANTILES:
        exact = exact_percentile(values, q)
        reported = found.quantile(q)
        assert reported is not None
        assert min(values) <= reported <= max(values)
        assert abs(reported - exact) <= max(sketch.ALPHA * exact * (1 + 1e-9), 0.001), (q, exact)
        assert abs(reported - exact) <= max(0.05 * exact, 0.001)  # rule 36's bound


@given(st.lists(st.floats(min_value=0.0, max_value=0.001), min_size=1, max_size=50))
def test_rule_36_values_below_a_millisecond_are_within_a_millisecond(values: list[float]) -> None:
    found = sketched(values, 1, random.Random(0))
    for q in QUANTILES:
        assert abs((found.quantile(q) or 0) - exact_percentile(values, q)) <= 0.001


def test_the_nearest_rank_is_exact_where_floating_point_is_not() -> None:
    assert math.ceil(0.07 * 100) == 8 and rank(0.07, 100) == 7  # not 8
    assert rank(0.99, 1000) == 990 and rank(0.5, 1) == 1 and rank(0.999, 10) == 10
    assert exact_percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.5) == 3.0


def test_about_460_buckets_span_a_millisecond_to_a_day() -> None:
    assert sketch.bucket(DAY) - sketch.bucket(0.0011) < 460
    assert sketch.bucket(0.0) == sketch.bucket(0.001) == sketch.LOW
    assert sketch.bucket(math.nan) == sketch.LOW  # never raises
    for v in (0.0011, 0.05, 1.0, 9.99, 10.0, 3600.0, DAY):
        assert abs(sketch.representative(sketch.bucket(v)) - v) <= sketch.ALPHA * v * 1.000001
