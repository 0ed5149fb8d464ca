"""The project's goals (scripts/bench_goals.py), checked against ``hailq bench`` figures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from hailq.bench.runner import Figure

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from bench_goals import check_goals, main, render_goals


def _cycle(consumers: str, batch: int, hailq: float, raw: float) -> Figure:
    return Figure(f"receive+ack, {consumers}, batch {batch}", "msgs/s", hailq, raw)


FOUR = "4 consumers (processes)"


def test_goals_met_and_not_met_are_told_apart() -> None:
    figures = [_cycle("1 consumer", 1, 2_000, 2_100), _cycle(FOUR, 1, 3_800, 4_100),
               _cycle("1 consumer", 10, 9_000, 30_000), _cycle(FOUR, 10, 21_000, 35_000),
               Figure("receive latency, 1,000 waiting", "ms", 0.4, 0.3),
               Figure("receive latency, 1,000,000 waiting", "ms", 0.8, 0.3)]
    ratio, rate, latency = check_goals(figures)
    assert ratio.met and ratio.measured == "0.95, 0.93"  # batch 10's 0.30 is not this goal
    assert rate.met and "21,000 (batch 10)" in rate.measured
    assert not latency.met and latency.measured == "2.00×"
    assert "1,000,000 vs 1,000" in latency.name
    text = render_goals([ratio, rate, latency])
    assert "NOT met" in text and text.count("met") == 3


def test_a_ratio_below_half_or_a_slow_pool_is_not_met() -> None:
    ratio, rate = check_goals([_cycle("1 consumer", 1, 900, 2_000),
                               _cycle(FOUR, 1, 5_999, 6_500)])
    assert not ratio.met and not rate.met


def test_parts_not_measured_give_no_goals() -> None:
    assert check_goals([Figure("send, one by one", "msgs/s", 1, 2)]) == []
    assert render_goals([]) == ""


def test_storage_core_goals_postgres_sends_fills_and_wake_up() -> None:
    from hailq.bench.workers import FillFigure, WorkerFigure

    sends = Figure("send, one by one", "msgs/s", 1_600, 3_200)
    fill = FillFigure("worker drain, 1 process × 8 threads, single-send fill "
                      "(vs send_many fill)", "msgs/s", 9_700, 10_000, baseline="send_many")
    p50 = WorkerFigure("send→handler start p50, idle worker (vs target)", "ms", 1.4, 1.0)
    p99 = WorkerFigure("send→handler start p99, idle worker (vs target)", "ms", 2.9, 3.0)
    send, drain, late, fast = check_goals([sends, fill, p50, p99], postgres=True)
    assert not send.met and send.measured == "0.50" and "0.8" in send.name
    assert drain.met and drain.measured == "0.97"
    assert not late.met and late.name.endswith("≤ 1 ms")
    assert fast.met and fast.measured == "2.90 ms"
    # SQLite has no send goal of 0.8; its drain and wake-up goals are the same.
    assert [g.name for g in check_goals([sends, fill], postgres=False)] == [drain.name]


def test_postgres_send_goal_is_judged_against_the_same_row_with_the_minimal_table_beside() -> None:
    from hailq.bench.runner import SAME_ROW

    minimal = Figure("send, one by one", "msgs/s", 1_600, 3_200)
    same_row = Figure(SAME_ROW, "msgs/s", 1_700, 2_000)
    (send,) = check_goals([minimal, same_row], postgres=True)
    assert send.met and send.measured == "0.85 (0.50 against the minimal table)"
    assert "same row" in send.name
    (short,) = check_goals([minimal, Figure(SAME_ROW, "msgs/s", 1_500, 2_000)], postgres=True)
    assert not short.met and short.measured.startswith("0.75")
    assert check_goals([same_row], postgres=False) == []


def test_the_script_reads_a_bench_json_file(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    report = {"backends": {"sqlite": [
        _cycle("1 consumer", 1, 2_000, 2_100).as_json(),
        _cycle(FOUR, 1, 1_000, 4_100).as_json()]}}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(report))
    assert main([str(path)]) == 1  # 4 processes: 0.24 of the bare driver, 1,000/s
    out = capsys.readouterr().out
    assert out.startswith("sqlite") and "NOT met" in out


def test_shared_sends_and_async_cycles_have_their_goals() -> None:
    shared = [Figure("send from 16 threads (vs one thread)", "msgs/s", 900, 150),
              Figure("send from 100 coroutines (vs a bare insert loop)", "msgs/s", 300, 250)]
    cycles = [Figure("async receive+ack, batch 1 (vs sync)", "msgs/s", 250, 500),
              Figure("async receive+ack, batch 10 (vs sync)", "msgs/s", 1_800, 2_300)]
    pg = {g.name: g for g in check_goals(shared + cycles, postgres=True)}
    assert pg["send from 16 threads ≥ 3 × one thread"].met
    assert not pg["send from 100 coroutines ≥ 1.5 × a bare insert loop"].met
    assert not pg["async receive+ack, batch 1 ≥ 0.83 × sync"].met
    sqlite = {g.name: g for g in check_goals(cycles)}
    assert sqlite["async receive+ack, batch 10 ≥ 0.67 × sync"].met
