"""Smoke test of the worker benchmark at tiny sizes: it runs and its numbers are sane.

No speed is asserted: only that each measurement finishes, workers exit 0, every
message is acked, and the figures are finite and in range.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pytest

import hailq
from hailq.bench import handlers
from hailq.bench.runner import Figure
from hailq.bench.workers import (
    QUEUE,
    bench_workers,
    cpu_seconds,
    drain_once,
    latency_once,
    percentile,
    render_workers,
)


def test_a_ratio_pairs_each_run_with_the_baseline_of_its_own_turn() -> None:
    """A neighbour that halves the second turn halves both sides of it: the paired
    ratio stays 0.5, while the two medians come from different turns."""
    drifting = Figure("receive+ack", "msgs/s", hailq=100.0, raw=400.0,
                      runs=[100.0, 50.0, 100.0], raw_runs=[200.0, 100.0, 400.0])
    assert drifting.ratio == pytest.approx(0.5)
    assert drifting.hailq / drifting.raw == pytest.approx(0.25)
    unpaired = Figure("latency", "ms", hailq=0.2, raw=0.1)
    assert unpaired.ratio == pytest.approx(2.0)


def test_percentile() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0], 50) == 1.5
    assert percentile([5.0], 99) == 5.0
    assert percentile(list(map(float, range(101))), 99) == pytest.approx(99.0)


def test_cpu_seconds_of_this_process() -> None:
    before = cpu_seconds(os.getpid())
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    assert cpu_seconds(os.getpid()) >= before


def test_record_start_appends_id_and_time(tmp_path: Path) -> None:
    out = tmp_path / "starts.txt"
    with hailq.connect(f"sqlite:///{tmp_path / 'h.db'}") as broker:
        queue = broker.queue(QUEUE)
        queue.send({"out": str(out)})
        (message,) = queue.receive()
        handlers.record_start(message)
        handlers.noop(message)
    message_id, started = out.read_text().split()
    assert message_id == message.id
    assert abs(float(started) - time.time()) < 60


def test_drain_and_latency_run(url: str, tmp_path: Path) -> None:
    run = drain_once(url, 300, procs=2, concurrency=2, log_dir=tmp_path)
    assert run.acked == 300
    assert run.rate > 0 and math.isfinite(run.rate)
    lat = latency_once(url, 5, log_dir=tmp_path, idle_seconds=0.3, settle=0.2)
    assert len(lat.delays_ms) == 5
    assert all(-1_000 < d < 10_000 for d in lat.delays_ms)
    assert lat.p50 <= lat.p99
    assert 0 <= lat.idle_cpu < 200


@pytest.mark.parametrize("backend_name", ["sqlite"], indirect=False)
def test_bench_workers_figures(url: str) -> None:
    said: list[str] = []
    figures = bench_workers(url, 1, True, said.append, n=200, samples=4, idle_seconds=0.2)
    assert len(said) == 3
    assert [f.unit for f in figures] == ["msgs/s", "msgs/s", "ms", "ms", "%"]
    for f in figures:
        assert isinstance(f, Figure)
        assert math.isfinite(f.hailq) and f.runs
    assert figures[0].raw == 2_000.0 and figures[0].baseline == "peer"
    assert figures[3].baseline == "none"  # SQLite has no p99 target
    table = render_workers("SQLite", figures)
    assert "worker drain, 2 processes × 4 threads" in table
    (p99,) = [line for line in table.splitlines() if "p99" in line]
    assert p99.split()[-2:] == ["-", "-"]  # no target: no ratio either


def test_worker_figures_get_a_database_of_their_own() -> None:
    from hailq.bench.command import workers_url

    assert workers_url("sqlite:////tmp/b/bench.db") == "sqlite:////tmp/b/bench-workers.db"
    assert workers_url("postgresql://postgres@127.0.0.1:5432/test?schema=hailq_bench") == \
        "postgresql://postgres@127.0.0.1:5432/test?schema=hailq_bench_workers"
    assert workers_url("postgresql://u@h/db").endswith("/db?schema=hailq_workers")
