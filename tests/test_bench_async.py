"""``hailq bench``'s async figures: each cycle against the sync one of the same turn,
and on SQLite the hop to a broker thread with what the machine's idle cores do (the
goals are checked on real runs, not here)."""

from __future__ import annotations

from pathlib import Path

import pytest

import hailq
from hailq.bench import aio
from hailq.bench.aio import HOP, bench_async, idle_policy
from hailq.bench.command import render


def test_each_async_cycle_has_the_sync_cycle_of_its_turn(url: str) -> None:
    figures = bench_async(url, runs=1, n=1_000, batch=10)
    by_name = {f.name: f for f in figures}
    plain = by_name["async receive+ack, batch 10 (vs sync)"]
    joined = by_name["async ack_and_receive, batch 10 (vs sync receive+ack)"]
    assert plain.hailq > 0 and joined.hailq > 0 and plain.raw > 0
    assert joined.raw_runs == plain.raw_runs  # one sync drain, the baseline of both
    hop = by_name.get(HOP)
    assert (hop is not None) == url.startswith("sqlite")  # PostgreSQL's calls stay on the loop
    if hop is not None:
        assert hop.unit == "µs" and 0 < hop.hailq < 1e6
    text = render("SQLite", figures)
    assert "async ack_and_receive, batch 10 " in text
    assert "sync: receive, then ack_many, for every async figure" in text
    assert (HOP in text) == url.startswith("sqlite")
    assert hailq.connect(url).queue("bench").stats().ready == 0  # all drained


def test_batch_one_has_one_figure_and_no_hop(url: str) -> None:
    figures = bench_async(url, runs=1, n=100, batch=1)
    assert [f.name for f in figures] == ["async receive+ack, batch 1 (vs sync)"]


@pytest.mark.parametrize(("written", "said"), [
    ("0\n", "idle vCPUs halt at once (guest halt polling off)"),
    ("200000\n", "idle vCPUs poll 200 µs before they halt"),
    (None, None),
    ("not a number\n", None),
])
def test_the_idle_policy_is_told_as_the_machine_sets_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written: str | None,
        said: str | None) -> None:
    knob = tmp_path / "guest_halt_poll_ns"
    if written is not None:
        knob.write_text(written)
    monkeypatch.setattr(aio, "HALT_POLL", knob)
    told = idle_policy()
    assert told == said if said is None else told is not None and told.startswith(said)
