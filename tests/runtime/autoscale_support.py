"""Running ``hailq autoscale`` as a real process in tests, and counting its workers.

Its worker processes are counted from ``/proc`` (children of the autoscaler started by
multiprocessing's spawn), by a sampler thread that keeps the largest count it saw, so a
test can say ``--max`` was never exceeded, not only that it holds at the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import hailq
from waiting import wait_until

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent / "src"


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state) of a process, None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), fields[0]


def alive(pid: int) -> bool:
    found = _stat(pid)
    return found is not None and found[1] not in ("Z", "X")


def workers_of(parent: int) -> set[int]:
    """Live worker processes whose parent is ``parent`` (spawned by multiprocessing)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        stat = _stat(pid)
        if stat is None or stat[0] != parent or stat[1] in ("Z", "X"):
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in cmdline:
            found.add(pid)
    return found


class Pool:
    """One ``hailq autoscale`` process and a sampler of its worker processes."""

    def __init__(self, url: str, tmp_path: Path, *args: str,
                 env: dict[str, str] | None = None) -> None:
        self.log = tmp_path / "autoscale.log"
        full_env = dict(os.environ, HAILQ_URL=url, **(env or {}),
                        PYTHONPATH=os.pathsep.join([str(HERE), str(SRC),
                                                    os.environ.get("PYTHONPATH", "")]))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hailq.cli.main", "autoscale",
             "autoscale_handlers:sleepy", *args],
            env=full_env, stdout=subprocess.DEVNULL, stderr=self.log.open("w"), text=True,
            cwd=tmp_path)
        self.most = 0  # the most worker processes seen at once
        self.seen: set[int] = set()  # every worker process seen
        self.counts: list[tuple[float, int]] = []  # (monotonic, workers) per sample
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            now = workers_of(self.process.pid)
            self.seen |= now
            self.most = max(self.most, len(now))
            self.counts.append((time.monotonic(), len(now)))
            self._stop.wait(0.1)

    def workers(self) -> int:
        return len(workers_of(self.process.pid))

    def close(self) -> str:
        """Stop sampling; end the autoscaler if it still runs (its workers drain) and
        any worker left; return its log."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._stop.set()
        self._sampler.join(5)
        for pid in self.seen:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        return self.log.read_text()


def wait_for(what: str, check: Callable[[], bool], timeout: float = 120.0,
             log: Callable[[], str] | None = None) -> None:
    """Wait for ``check()`` with a generous deadline (a loaded machine is slow)."""
    if wait_until(check, timeout, step=0.2):
        return
    raise AssertionError(f"timed out waiting for {what}" +
                         (f"\n--- autoscaler log ---\n{log()[-6000:]}" if log else ""))


def decisions(broker: hailq.Broker, queue: str, limit: int = 1000) -> list[
        hailq.AutoscalerInfo]:
    """The queue's stored decisions, oldest first."""
    return list(reversed(broker.autoscale_decisions(queue, limit)))
