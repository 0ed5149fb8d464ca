"""``hailq demo`` end to end through the ``hailq`` console script, small and fast.

The story's promises hold on each backend, the exit code says whether they
did, and ``--url`` and ``--json`` are taken as every hailq command takes
them: after the command name or before it. ``HAILQ_URL`` names the user's own
broker, so the demo never runs in it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import hailq
from hailq.demo.story import CHECKS, Plan, make_claims

HAILQ = Path(sys.executable).with_name("hailq")  # the console script of this environment
FAST = ["--claims", "2000", "--checkers", "20", "--scale", "200"]
ODD_CHECKERS = {"slow-checker", "checker-crashes", "checker-restarted"}


def hailq_cli(*args: str, env: dict[str, str] | None = None,
              timeout: float = 120) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "HAILQ_URL"}
    environment.update(env or {})
    return subprocess.run([str(HAILQ), *args], capture_output=True, text=True,
                          timeout=timeout, env=environment)


def report_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.stdout.strip().startswith("{"), done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_the_hailstorm_keeps_every_promise(url: str) -> None:
    done = hailq_cli("demo", "--url", url, "--json", *FAST)
    report = report_of(done)
    assert report["invariants"] == {name: True for name in report["invariants"]}, report
    assert done.returncode == 0
    assert report["ok"] is True
    assert report["claims"] == report["statistics_count"] == 2000
    assert (report["lost"], report["duplicates"], report["dead"]) == (0, 0, 1)
    assert report["results"] == 1999  # every claim but the corrupt one
    # The slow checker's ack came after another checker received its claim: rejected.
    assert (report["late_acks_rejected"], report["late_acks_accepted"]) == (1, 0)
    assert report["skipped_by_inbox"] >= 1  # ... and its claim's result was written once
    assert report["crashed_claim_redelivered"]
    assert report["redeliveries"] >= 2 + 4  # crash, slow checker, corrupt claim's retries
    assert report["checkers"] == 20  # the crashing and the slow checker among them
    assert report["ideal"] == pytest.approx(2000 * 0.015 / 20, rel=0.01)
    assert report["makespan"] >= report["ideal"]
    assert report["vip_wait"]["count"] == 50
    assert report["vip_wait"]["p99"] <= report["normal_wait"]["p50"]  # VIPs go first


def test_the_crashing_and_the_slow_checker_are_two_of_the_checkers(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    done = hailq_cli("demo", "--json", "--keep", str(kept), *FAST)
    report = report_of(done)
    assert report["ok"] is True, report
    assert done.returncode == 0
    assert (kept / "broker.db").exists() and (kept / "results.db").exists()
    with sqlite3.connect(kept / "results.db") as conn:
        checkers = {name for (name,) in conn.execute("SELECT DISTINCT checker FROM results")}
    # Every odd checker also checked claims like the others, and the worker had one
    # slot fewer for each of the two: 18 slots + slow + crashing = 20 checkers (the
    # restarted process took the crashed one's place).
    assert checkers >= ODD_CHECKERS
    assert len(checkers - ODD_CHECKERS) <= 20 - 2


def test_the_demo_exits_1_when_another_consumer_takes_claims(tmp_path: Path) -> None:
    """A second program on the demo's queue acks claims without writing results."""
    database = tmp_path / "broker.db"
    url = f"sqlite:///{database}"
    demo = subprocess.Popen([str(HAILQ), "--json", "--url", url, "demo", *FAST],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stolen: list[int] = []
    thief = threading.Thread(target=_steal, args=(database, url, 10, stolen), daemon=True)
    thief.start()
    try:
        stdout, stderr = demo.communicate(timeout=120)
    finally:
        demo.kill()
    thief.join(10)
    assert len(stolen) == 10, stderr
    report = json.loads(stdout)
    assert demo.returncode == 1, report
    assert report["ok"] is False
    assert report["invariants"]["lost_0"] is False
    [corrupt] = [c.number for c in make_claims(Plan(2000, 20, 200)) if c.corrupt]
    assert report["lost"] == len(set(stolen) - {corrupt})  # a corrupt claim is not lost
    assert report["statistics_count"] == 2000  # the statistics program got its copies


def _steal(database: Path, url: str, count: int, stolen: list[int]) -> None:
    deadline = time.monotonic() + 60
    while not database.exists():  # connecting first would create the file the demo wants
        if time.monotonic() > deadline:
            return
        time.sleep(0.01)
    with hailq.connect(url) as broker:
        while len(stolen) < count and time.monotonic() < deadline:
            try:
                queue = broker.get_queue(CHECKS)
            except hailq.QueueNotFound:
                time.sleep(0.01)
                continue
            messages = queue.receive(max_messages=count - len(stolen), wait=1)
            queue.ack_many(messages)
            stolen += [int(m.body["claim"]) for m in messages if isinstance(m.body, dict)]


@pytest.mark.parametrize("args, env, chosen", [
    (["--url", "nosuch://before", "demo"], {"HAILQ_URL": "nosuch://env"}, "nosuch://before"),
    (["--url", "nosuch://before", "demo", "--url", "nosuch://after"], {}, "nosuch://after"),
    (["demo", "--url", "nosuch://after"], {"HAILQ_URL": "nosuch://env"}, "nosuch://after"),
])
def test_the_broker_url_is_chosen_as_for_every_hailq_command(
        args: list[str], env: dict[str, str], chosen: str) -> None:
    # An unknown scheme stops the demo before anything runs, naming the URL it chose.
    done = hailq_cli(*args, *FAST, env=env, timeout=30)
    assert done.returncode == 2  # bad input; 1 means a promise was broken
    assert done.stderr.startswith("hailq: error:")
    assert f"unsupported broker URL '{chosen}'" in done.stderr


def test_the_demo_never_writes_into_an_existing_sqlite_broker(tmp_path: Path) -> None:
    database = tmp_path / "claims.db"
    with hailq.connect(f"sqlite:///{database}") as broker:
        broker.queue("claims").send({"claim": 8311})
    before = database.read_bytes()
    done = hailq_cli("demo", "--url", f"sqlite:///{database}", *FAST, timeout=30)
    assert done.returncode == 2
    assert "already exists" in done.stderr
    assert database.read_bytes() == before


def test_after_the_quick_start_export_the_demo_runs_in_its_own_workspace(
        tmp_path: Path) -> None:
    # The README's quick start: export HAILQ_URL=sqlite:///claims.db, a worker fills it.
    database = tmp_path / "claims.db"
    with hailq.connect(f"sqlite:///{database}") as broker:
        broker.queue("claims").send({"claim": 8311})
    before = database.read_bytes()
    done = hailq_cli("demo", "--json", *FAST, env={"HAILQ_URL": f"sqlite:///{database}"})
    report = report_of(done)
    assert done.returncode == 0 and report["ok"] is True, report
    assert report["backend"] == "sqlite" and report["claims"] == 2000
    assert database.read_bytes() == before  # the user's broker was never opened
    assert done.stderr.startswith("hailq: note: the demo does not use HAILQ_URL")
    assert str(database) not in done.stderr


def test_keep_refuses_a_directory_with_an_earlier_run(tmp_path: Path) -> None:
    (tmp_path / "results.db").write_bytes(b"")
    done = hailq_cli("demo", "--keep", str(tmp_path), *FAST, timeout=30)
    assert done.returncode == 2
    assert "already holds a demo run (results.db)" in done.stderr


def test_help_tells_the_story() -> None:
    done = hailq_cli("demo", "--help", timeout=30)
    assert done.returncode == 0
    assert "hailstorm" in done.stdout and "--json" in done.stdout and "HAILQ_URL" in done.stdout
    alone = subprocess.run([sys.executable, "-m", "hailq.demo.command", "--help"],
                           capture_output=True, text=True, timeout=30)
    assert alone.returncode == 0 and "hailstorm" in alone.stdout


def test_the_command_is_a_click_command_named_demo_for_the_hailq_group() -> None:
    import click

    from hailq.demo.command import demo_command

    assert isinstance(demo_command, click.Command)
    assert demo_command.name == "demo"
