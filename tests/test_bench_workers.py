"""Smoke test of the worker benchmark at tiny sizes: it runs and its numbers are sane.

No speed is asserted: only that each measurement finishes, workers exit 0, every
message is acked, and the figures are finite and in range.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import hailq
from hailq.bench import handlers
from hailq.bench.runner import Figure
from hailq.bench.workers import (
    PEER_RATE,
    PRODUCERS,
    QUEUE,
    FillFigure,
    backend_of,
    bench_workers,
    cpu_seconds,
    drain_once,
    fill_queue,
    latency_once,
    percentile,
    render_workers,
)
from hailq.url import parse_url


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


def test_noop_after_go_holds_each_handler_until_the_go_file_exists(tmp_path: Path) -> None:
    import threading

    go = tmp_path / "go"
    with hailq.connect(f"sqlite:///{tmp_path / 'h.db'}") as broker:
        queue = broker.queue(QUEUE)
        queue.send_many([{"go": str(go)}] * 2)
        first, second = queue.receive(max_messages=2)
        waiting = threading.Thread(target=handlers.noop_after_go, args=(first,))
        waiting.start()
        waiting.join(0.1)
        assert waiting.is_alive()  # no go yet: the drain's clock has not started
        go.touch()
        waiting.join(5)
        assert not waiting.is_alive()
        go.unlink()
        handlers.noop_after_go(second)  # once seen, a go is not looked for again
        queue.send({"claim": 8311})
        (plain,) = queue.receive()
        with pytest.raises(ValueError, match="needs a body like"):
            handlers.noop_after_go(plain)


@pytest.mark.slow  # a long scenario: .ci/run runs it after make test
def test_drain_and_latency_run(url: str, tmp_path: Path) -> None:
    run = drain_once(url, 300, procs=2, concurrency=2, log_dir=tmp_path)
    assert run.acked == 300
    assert run.rate > 0 and math.isfinite(run.rate)
    single = drain_once(url, 120, procs=1, concurrency=2, log_dir=tmp_path, fill="single",
                        producers=3)
    assert single.acked == 120 and single.fill_seconds > 0
    lat = latency_once(url, 5, log_dir=tmp_path, idle_seconds=0.3, settle=0.2)
    assert len(lat.delays_ms) == 5
    assert all(-1_000 < d < 10_000 for d in lat.delays_ms)
    assert lat.p50 <= lat.p99
    assert 0 <= lat.idle_cpu < 200


@pytest.mark.slow  # a long scenario: .ci/run runs it after make test
def test_bench_workers_figures_and_their_json(url: str, backend_name: str) -> None:
    """Both fills' drains come out side by side, in the table and in --json."""
    from hailq.bench.command import _record

    said: list[str] = []
    figures = bench_workers(url, 1, True, said.append, n=200, samples=4, idle_seconds=0.2)
    assert len(said) == 3
    assert [f.unit for f in figures] == ["msgs/s", "msgs/s", "msgs/s", "ms", "ms", "%"]
    for f in figures:
        assert isinstance(f, Figure)
        assert math.isfinite(f.hailq) and f.runs
    batch, single, two = figures[:3]
    assert batch.name == "worker drain, 1 process × 8 threads, send_many fill (vs peer)"
    assert batch.raw == PEER_RATE[backend_of(url)] and batch.baseline == "peer"
    assert isinstance(single, FillFigure) and single.baseline == "send_many fill"
    assert single.name == ("worker drain, 1 process × 8 threads, single-send fill "
                           "(vs send_many fill)")
    assert single.raw == batch.hailq and single.raw_runs == batch.runs  # the same drains
    assert single.ratio == pytest.approx(single.hailq / batch.hailq)
    assert single.producers == PRODUCERS[backend_of(url)] and single.messages == 200
    assert two.name == "worker drain, 2 processes × 4 threads (vs peer)"

    report: dict[str, Any] = {"backends": {}}
    _record(report, backend_name, figures)
    written = json.loads(json.dumps(report))["backends"][backend_name]
    (fills,) = [f for f in written if "single_send_fill" in f]
    assert fills["single_send_fill"] == single.hailq > 0
    assert fills["send_many_fill"] == batch.hailq > 0
    assert fills["single_vs_send_many"] == pytest.approx(single.hailq / batch.hailq)
    assert fills["messages"] == 200 and set(fills["fill_seconds"]) == {"send_many", "single"}
    assert all("ratio" in f for f in written)

    table = render_workers(backend_name, figures)
    (row,) = [line for line in table.splitlines() if "single-send fill" in line]
    assert row.split()[-3:] == [f"{single.hailq:,.0f}", f"{batch.hailq:,.0f}",
                                f"{single.ratio:.2f}"]
    assert "worker drain, 2 processes × 4 threads" in table
    assert "200 messages sent before the workers start" in table
    if backend_name == "sqlite":
        (p99,) = [line for line in table.splitlines() if "p99" in line]
        assert p99.split()[-2:] == ["-", "-"]  # no target: no ratio either


def test_a_single_send_fill_is_one_transaction_a_message(url: str, backend_name: str) -> None:
    """What the two fills differ in: send_many commits a thousand messages at a time,
    the single-send fill (from several producer threads) one at a time."""
    body = {"claim": 8311}
    with hailq.connect(url) as broker:
        queue = broker.queue(QUEUE, lease=60)
        for fill, n, transactions in (("send_many", 2_500, 3), ("single", 301, 301)):
            queue.purge(dead=False)
            assert fill_queue(url, n, body, fill=fill, producers=4) > 0
            assert queue.stats().ready == n
            if backend_name == "postgres":
                schema = parse_url(url).options["schema"]
                with psycopg.connect(parse_url(url).target) as conn:
                    row = conn.execute(sql.SQL("SELECT count(DISTINCT xmin::text) FROM "
                                               "{}.messages").format(sql.Identifier(schema))
                                       ).fetchone()
                assert row == (transactions,)
    with pytest.raises(ValueError, match="fill must be one of"):
        fill_queue(url, 1, body, fill="bulk")


def test_worker_figures_get_a_database_of_their_own() -> None:
    from hailq.bench.command import workers_url

    assert workers_url("sqlite:////tmp/b/bench.db") == "sqlite:////tmp/b/bench-workers.db"
    assert workers_url("postgresql://postgres@127.0.0.1:5432/test?schema=hailq_bench") == \
        "postgresql://postgres@127.0.0.1:5432/test?schema=hailq_bench_workers"
    with pytest.raises(ValueError, match=r"\?schema="):
        workers_url("postgresql://u@h/db")  # never next to hailq's default schema
