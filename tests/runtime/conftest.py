"""Fixtures for the worker tests: real worker processes and an effects database."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent / "src"
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # the handler module, as the worker processes import it

StartWorker = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def effects(tmp_path: Path) -> Iterator[str]:
    """Path of the effects database the test handlers write to."""
    path = str(tmp_path / "effects.db")
    import handlers

    handlers.effects_db(path).close()
    yield path


@pytest.fixture
def start_worker(url: str, effects: str, tmp_path: Path) -> Iterator[StartWorker]:
    """Start ``python -m hailq.cli.worker TARGET ARGS...`` on the test's database."""
    started: list[subprocess.Popen[str]] = []

    def start(target: str, *args: str, log_name: str | None = None) -> subprocess.Popen[str]:
        env = dict(os.environ, HAILQ_TEST_EFFECTS=effects, HAILQ_URL=url,
                   PYTHONPATH=os.pathsep.join([str(HERE), str(SRC),
                                               os.environ.get("PYTHONPATH", "")]))
        log = tmp_path / (log_name or f"worker{len(started)}.log")
        process = subprocess.Popen(
            [sys.executable, "-m", "hailq.cli.worker", target, *args],
            env=env, stdout=subprocess.DEVNULL, stderr=log.open("w"), text=True,
            cwd=tmp_path, start_new_session=True)  # a group of its own, see below
        started.append(process)
        return process

    yield start
    for process in started:
        # The whole group: a --pool process child outlives its SIGKILLed supervisor for
        # its drain, and its connection would hold locks the schema's DROP waits for.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
    for log in sorted(tmp_path.glob("worker*.log")):  # shown by pytest when a test fails
        print(f"--- {log.name} ---\n{log.read_text()[-5000:]}")

