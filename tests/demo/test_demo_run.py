"""``hailq demo`` end to end, small and fast, on each backend: the story's promises hold."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

FAST = ["--claims", "2000", "--checkers", "20", "--scale", "200"]


def run_demo(*args: str, timeout: float = 120) -> tuple[int, dict[str, Any], str]:
    done = subprocess.run([sys.executable, "-m", "hailq.demo.command", *args],
                          capture_output=True, text=True, timeout=timeout)
    report = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    return done.returncode, report, done.stderr


def test_the_hailstorm_keeps_every_promise(url: str, tmp_path: Path) -> None:
    code, report, stderr = run_demo("--url", url, "--json", *FAST)
    assert report, stderr
    assert report["invariants"] == {name: True for name in report["invariants"]}, report
    assert code == 0
    assert report["claims"] == report["statistics_count"] == 2000
    assert (report["lost"], report["duplicates"], report["dead"]) == (0, 0, 1)
    assert report["results"] == 1999  # every claim but the corrupt one
    assert report["late_acks_rejected"] == 1  # the slow checker's ack came too late
    assert report["skipped_by_inbox"] >= 1  # ... and its result was not written twice
    assert report["crashed_claim_redelivered"]
    assert report["redeliveries"] >= 2 + 4  # crash, slow checker, corrupt claim's retries
    assert report["ideal"] == pytest.approx(2000 * 0.015 / 20, rel=0.01)
    assert report["makespan"] >= report["ideal"]
    assert report["vip_wait"]["count"] == 50
    assert report["vip_wait"]["p99"] <= report["normal_wait"]["p50"]  # VIPs go first


def test_keep_leaves_the_databases_for_a_look_afterwards(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    code, report, stderr = run_demo("--json", "--keep", str(kept), *FAST)
    assert report["invariants"] == {name: True for name in report["invariants"]}, report
    assert code == 0, stderr
    assert (kept / "broker.db").exists() and (kept / "results.db").exists()


def test_help_tells_the_story() -> None:
    done = subprocess.run([sys.executable, "-m", "hailq.demo.command", "--help"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0
    assert "hailstorm" in done.stdout and "--json" in done.stdout


def test_the_command_is_a_click_command_named_demo_for_the_hailq_group() -> None:
    import click

    from hailq.demo.command import demo_command

    assert isinstance(demo_command, click.Command)
    assert demo_command.name == "demo"
