"""``hailq workers``, ``hailq migrate`` and the worker command's registration."""

from __future__ import annotations

import importlib.util
import time

import click

import hailq
from hailq.cli.main import _load

from .conftest import Hailq


def worker(id: str, host: str, pid: int, queues: list[str], in_flight: int) -> hailq.WorkerInfo:
    return hailq.WorkerInfo(id=id, host=host, pid=pid, queues=queues, concurrency=4,
                            in_flight=in_flight, started_at=time.time() - 3600,
                            last_seen=0.0, state="running")


def test_workers_marks_silent_ones_dead(hq: Hailq, sqlite_url: str) -> None:
    with hailq.connect(sqlite_url) as broker:
        broker.backend.worker_save(worker("w-alive", "img-01", 101, ["claims"], 3))
    with hailq.connect(sqlite_url, clock=lambda: time.time() - 60) as broker:
        broker.backend.worker_save(worker("w-gone", "img-02", 202, ["claims", "audit"], 1))
    found = {w["id"]: w for w in hq("workers", "--json").json()}
    assert found["w-alive"]["alive"] is True and found["w-alive"]["status"] == "running"
    assert found["w-gone"]["alive"] is False and found["w-gone"]["status"] == "dead"
    assert found["w-gone"]["last_seen_age"] > 15
    assert found["w-gone"]["queues"] == ["claims", "audit"]
    table = hq("workers").out
    for text in ("w-alive", "img-01", "101", "3/4", "running", "w-gone", "dead",
                 "claims, audit"):
        assert text in table


def test_workers_when_there_are_none(hq_any: Hailq, api_any: hailq.Broker) -> None:
    assert hq_any("workers", "--json").json() == []
    assert "no workers" in hq_any("workers").out


def test_migrate_prints_the_schema_version(hq_any: Hailq) -> None:
    result = hq_any("migrate", "--json").json()
    assert isinstance(result["schema_version"], int) and result["schema_version"] >= 1
    assert "schema version" in hq_any("migrate").out


def test_migrate_creates_the_database(hq: Hailq) -> None:
    assert hq("migrate").code == 0
    assert hq("queues", "--json").json() == []


def test_worker_command_is_offered_when_installed(hq: Hailq) -> None:
    result = hq("worker", "--help")
    if importlib.util.find_spec("hailq.cli.worker") is None:
        assert "No such command 'worker'" in result.assert_clean_error()
        return
    assert result.code == 0, result.err
    assert "Usage: hailq worker" in result.out
    assert "worker" in hq("--help").out


def test_a_missing_lazy_command_is_absent_and_a_broken_one_explains() -> None:
    assert _load("ghost", "hailq.cli.no_such_module", "command") is None
    broken = _load("broken", "json", "no_such_command")
    assert broken is not None
    try:
        broken.main([], standalone_mode=False)
    except click.ClickException as exc:
        assert "the broken command cannot be loaded" in exc.format_message()
    else:
        raise AssertionError("a broken command must fail when invoked")


def test_bench_refuses_a_broker_url_because_it_empties_what_it_measures(
        sqlite_url: str) -> None:
    from .conftest import run_hailq

    refused = run_hailq("--url", sqlite_url, "bench").assert_clean_error()
    assert "bench does not take --url" in refused
    assert "--postgres" in refused
    assert "JSON with --json FILE" in run_hailq("--json", "bench").assert_clean_error()
    assert run_hailq("bench", "--help").out.count("never uses the broker") == 1


def test_bench_only_names_its_parts() -> None:
    from .conftest import run_hailq

    assert "send, cycle (receive+ack), latency, workers" in " ".join(
        run_hailq("bench", "--help").out.split())
    assert "'cycles' is not one of" in run_hailq("bench", "--only", "cycles").err
