"""``hailq workers``, ``hailq migrate`` and the worker command's registration."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import click

import hailq
from hailq.cli.main import _load
from hailq.internal import ops
from hailq.url import parse_url
from waiting import wait_for, wait_past

from .conftest import Hailq


def worker(id: str, host: str, pid: int, queues: list[str], in_flight: int,
           state: str = "running") -> hailq.WorkerInfo:
    return hailq.WorkerInfo(id=id, host=host, pid=pid, queues=queues, concurrency=4,
                            in_flight=in_flight, started_at=time.time() - 3600,
                            last_seen=0.0, state=state)


def age_workers(url: str, seconds: float) -> None:
    """Move every worker's last report ``seconds`` into the past, in the database itself
    (PostgreSQL stamps reports with its own clock, so no injected clock can do this)."""
    parsed = parse_url(url)
    if parsed.scheme == "sqlite":
        with sqlite3.connect(parsed.target) as conn:
            conn.execute("UPDATE hailq_workers SET last_seen = last_seen - ?", (seconds,))
        return
    import psycopg
    from psycopg import sql

    with psycopg.connect(parsed.target, autocommit=True) as conn:
        conn.execute(sql.SQL("UPDATE {}.workers SET last_seen = last_seen - %s").format(
            sql.Identifier(parsed.options["schema"])), (seconds,))


def stored_states(url: str, queue: str) -> list[str]:
    """Each message's state as stored, in send order: not as a look works it out from the
    clock (an ended lease shows as ready to a look before anything writes it so)."""
    parsed = parse_url(url)
    if parsed.scheme == "sqlite":
        with contextlib.closing(sqlite3.connect(parsed.target)) as conn:
            rows = conn.execute("SELECT state FROM hailq_messages WHERE queue = ? ORDER BY seq",
                                (queue,)).fetchall()
        return [state for (state,) in rows]
    import psycopg
    from psycopg import sql

    with psycopg.connect(parsed.target) as conn:
        found = conn.execute(sql.SQL("SELECT state FROM {}.messages WHERE queue = %s "
                                     "ORDER BY seq").format(
            sql.Identifier(parsed.options["schema"])), (queue,)).fetchall()
    return [state for (state,) in found]


CHECKERS = textwrap.dedent("""
    from hailq import App

    app = App()

    @app.handler("claims")
    def check(message):
        pass
""")


def test_workers_marks_silent_ones_dead(hq: Hailq, sqlite_url: str) -> None:
    with hailq.connect(sqlite_url) as broker:
        ops(broker).save_worker(worker("w-alive", "img-01", 101, ["claims"], 3))
    with hailq.connect(sqlite_url, clock=lambda: time.time() - 60) as broker:
        ops(broker).save_worker(worker("w-gone", "img-02", 202, ["claims", "audit"], 1))
    found = {w["id"]: w for w in hq("workers", "--json").json()}
    assert found["w-alive"]["alive"] is True and found["w-alive"]["status"] == "running"
    assert found["w-gone"]["alive"] is False and found["w-gone"]["status"] == "dead"
    assert found["w-gone"]["last_seen_age"] > 15
    assert found["w-gone"]["queues"] == ["claims", "audit"]
    table = hq("workers").out
    for text in ("w-alive", "img-01", "101", "3/4", "running", "w-gone", "dead",
                 "claims, audit"):
        assert text in table


def test_workers_that_stopped_cleanly_are_stopped_not_dead(
        hq_any: Hailq, api_any: hailq.Broker, url: str) -> None:
    for id, state in [("w-stopped", "stopped"), ("w-draining", "draining"),
                      ("w-running", "running")]:
        ops(api_any).save_worker(worker(id, "img-01", 101, ["claims"], 0, state))
    age_workers(url, 60)
    found = {w["id"]: w for w in hq_any("workers", "--json").json()}
    assert (found["w-stopped"]["status"], found["w-stopped"]["alive"]) == ("stopped", False)
    # Silent without having stopped: killed, whatever it last said.
    assert (found["w-draining"]["status"], found["w-draining"]["alive"]) == ("dead", False)
    assert (found["w-running"]["status"], found["w-running"]["alive"]) == ("dead", False)
    rows = {line.split("│")[1].strip(): line.split("│")[-2].strip()
            for line in hq_any("workers").out.splitlines() if "w-" in line}
    assert rows == {"w-stopped": "stopped", "w-draining": "dead", "w-running": "dead"}


def test_a_worker_stopped_by_sigterm_shows_stopped_and_a_killed_one_dead(
        hq: Hailq, sqlite_url: str, tmp_path: Path) -> None:
    (tmp_path / "checkers.py").write_text(CHECKERS)
    env = {k: v for k, v in os.environ.items() if k not in ("HAILQ_URL", "PYTHONPATH")}
    hq("migrate")
    started = [subprocess.Popen([sys.executable, "-m", "hailq.cli.main", "worker",
                                 "checkers:app", "--url", sqlite_url], cwd=tmp_path, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for _ in range(2)]
    try:
        wait_for(lambda: len(hq("workers", "--json").json()) >= 2, 30,
                 what="the workers to report", step=0.1)
        stopped, killed = started
        stopped.send_signal(signal.SIGTERM)
        killed.send_signal(signal.SIGKILL)
        assert stopped.wait(30) == 0
        killed.wait(30)
    finally:
        for process in started:
            process.kill()
            process.wait(30)
    age_workers(sqlite_url, 60)  # long after: a killed worker has gone silent by now
    status = {w["pid"]: w["status"] for w in hq("workers", "--json").json()}
    assert status == {stopped.pid: "stopped", killed.pid: "dead"}


def test_workers_when_there_are_none(hq_any: Hailq, api_any: hailq.Broker) -> None:
    assert hq_any("workers", "--json").json() == []
    assert "no workers" in hq_any("workers").out


def test_workers_only_reads_and_maintain_forgets_the_long_silent(
        hq_any: Hailq, api_any: hailq.Broker, url: str) -> None:
    ops(api_any).save_worker(worker("w-old", "img-01", 101, ["claims"], 0))
    age_workers(url, 2 * 86400)
    ops(api_any).save_worker(worker("w-quiet", "img-02", 202, ["claims"], 0))
    age_workers(url, 120)
    ops(api_any).save_worker(worker("w-new", "img-03", 303, ["claims"], 1))
    for _ in range(2):  # looking forgets nobody, however long gone
        assert {w["id"] for w in hq_any("workers", "--json").json()} == {
            "w-old", "w-quiet", "w-new"}

    done = hq_any("maintain", "--json").json()
    assert (done["workers_forgotten"], done["forget_workers_after"]) == (1, 86400)
    assert {w["id"] for w in hq_any("workers", "--json").json()} == {"w-quiet", "w-new"}
    said = hq_any("maintain", "--forget-workers-after", "60").out
    assert "forgot 1 worker silent for more than 1m00s" in said
    assert [w["id"] for w in hq_any("workers", "--json").json()] == ["w-new"]
    # Shorter than a worker's silence before it counts as dead would forget running ones.
    assert "--forget-workers-after" in hq_any(
        "maintain", "--forget-workers-after", "5").assert_clean_error(2)


def test_maintain_settles_ended_leases_and_due_messages_of_every_queue(
        hq_any: Hailq, api_any: hailq.Broker, url: str) -> None:
    claims = api_any.queue("claims", lease=0.5, max_attempts=1)
    claims.send({"claim": 1})
    assert claims.receive()
    audit = api_any.queue("audit", lease=0.5, max_attempts=3)
    audit.send({"claim": 2})
    assert audit.receive()
    audit.send({"claim": 3}, delay=0.5)
    wait_past(api_any.now, api_any.now() + 0.5)  # the leases have ended, the delay too
    for look in (["queues"], ["stats"], ["peek", "claims"], ["peek", "audit"],
                 ["dead", "claims"]):
        assert hq_any(*look).code == 0
    # The looks showed the truth without writing it.
    assert stored_states(url, "claims") == ["leased"]
    assert stored_states(url, "audit") == ["leased", "scheduled"]

    done = hq_any("maintain", "--json").json()
    assert (done["queues"], done["workers_forgotten"]) == (2, 0)
    assert stored_states(url, "claims") == ["dead"]
    assert stored_states(url, "audit") == ["ready", "ready"]
    [dead] = hq_any("dead", "claims", "--json").json()
    assert dead["last_error"] == "lease expired"
    assert "maintained 2 queues" in hq_any("maintain").out


def test_maintain_never_creates_a_database(tmp_path: Path) -> None:
    from .conftest import run_hailq

    line = run_hailq("maintain", url=f"sqlite:///{tmp_path / 'typo.db'}").assert_clean_error(1)
    assert "no hailq database" in line and "hailq migrate" in line
    assert list(tmp_path.iterdir()) == []


def test_maintain_never_creates_a_postgres_schema(pg_url: str) -> None:
    import psycopg

    from .conftest import run_hailq

    line = run_hailq("maintain", url=pg_url).assert_clean_error(1)
    assert "no hailq schema" in line
    server, schema = pg_url.rsplit("schema=", 1)
    with psycopg.connect(server.rstrip("?&")) as conn:
        assert conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                            (schema,)).fetchall() == []


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

    assert "send, shared (single sends from 16 threads and from 100 coroutines, sharing " \
        "commits), cycle " \
        "(receive+ack), async (receive+ack through hailq.aio beside the sync API), keys " \
        "(receive+ack over 10,000 ordering keys), latency, workers" in " ".join(
        run_hailq("bench", "--help").out.split())
    assert "'cycles' is not one of" in run_hailq("bench", "--only", "cycles").err
