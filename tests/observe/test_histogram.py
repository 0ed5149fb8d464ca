"""Fixed-bucket histograms: percentiles and exact service levels (rule 25)."""

from __future__ import annotations

import math

from hailq.observe.histogram import DEFAULT_BOUNDS, Histogram, bounds_for, bucket_of


def test_buckets_are_opentelemetrys_defaults_extended_to_ten_minutes() -> None:
    assert DEFAULT_BOUNDS[:14] == (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75,
                                   1.0, 2.5, 5.0, 7.5, 10.0)
    assert DEFAULT_BOUNDS[-1] == 600.0
    assert bounds_for(None)[-1] == math.inf


def test_each_service_level_target_is_a_bucket_bound() -> None:
    bounds = bounds_for({9: 2.0, 0: 600})
    assert 2.0 in bounds and 600.0 in bounds
    assert list(bounds) == sorted(bounds)


def test_a_value_on_a_bound_falls_within_it_as_prometheus_le_says() -> None:
    bounds = bounds_for({9: 2.0})
    assert bucket_of(bounds, 2.0) == 2.0
    assert bucket_of(bounds, 2.0001) == 2.5
    assert bucket_of(bounds, 0.0) == 0.005
    assert bucket_of(bounds, 10_000) == math.inf


def test_share_within_a_target_is_exact_and_quantiles_interpolate() -> None:
    bounds = bounds_for({9: 2.0})
    waits = [0.3] * 90 + [1.9] * 5 + [2.1] * 4 + [9000.0]
    rows: dict[float, list[float]] = {}
    for w in waits:
        cell = rows.setdefault(bucket_of(bounds, w), [0, 0.0])
        cell[0] += 1
        cell[1] += w
    h = Histogram.of(((le, int(n), t) for le, (n, t) in rows.items()), bounds)
    assert h.count == 100
    assert h.within(2.0) == 95  # exactly the waits of at most 2 s
    assert 0.25 <= (h.quantile(0.5) or 0) <= 0.5
    assert 1.0 <= (h.quantile(0.95) or 0) <= 2.0
    assert h.quantile(1.0) == 600.0  # the +Inf bucket answers its lower bound
    assert math.isclose(h.total, sum(waits))
    assert h.cumulative()[-1] == (math.inf, 100)
    assert Histogram.of([]).quantile(0.5) is None
