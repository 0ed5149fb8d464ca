"""``hailq bench``'s shared-commit figures: measured in one run against their baselines
and printed in their own section (the goals are checked on real runs, not here)."""

from __future__ import annotations

import hailq
from hailq.bench.command import render
from hailq.bench.shared import AWAITED, SHARED, bench_shared


def test_the_figures_have_their_baselines_and_their_section(url: str) -> None:
    figures = bench_shared(url, runs=1, n=64)
    names = [f.name for f in figures]
    assert names[0] == f"{SHARED} (vs one thread)"
    assert (f"{SHARED} (vs a bare insert loop)" in names) == url.startswith("postgresql")
    assert f"{AWAITED} (vs one thread)" in names  # hailq.aio's, in the same run
    assert (f"{AWAITED} (vs a bare insert loop)" in names) == url.startswith("postgresql")
    assert all(f.hailq > 0 and f.raw > 0 and len(f.runs) == 1 for f in figures)
    text = render("SQLite", figures)
    assert "producers that share commits" in text and SHARED in text and AWAITED in text
    assert hailq.connect(url).queue("bench").stats().ready == 0  # it cleans up after itself
