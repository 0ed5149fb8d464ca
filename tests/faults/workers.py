"""Real worker processes (``python -m hailq.cli.worker``) and the crash storm that kills them."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import hailq

from .ledger import EffectStore, Ledger

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent / "src"


def worker_env(store: EffectStore) -> dict[str, str]:
    return dict(os.environ, FAULTS_EFFECTS=store.spec(),
                PYTHONPATH=os.pathsep.join([str(HERE), str(SRC),
                                            os.environ.get("PYTHONPATH", "")]))


class WorkerFleet:
    """N worker processes on one queue; kill, restart and stop them; keep their logs."""

    def __init__(self, url: str, queue: str, store: EffectStore, logs: Path, *,
                 processes: int, concurrency: int = 4, grace: float = 5.0,
                 extra: tuple[str, ...] = ()) -> None:
        self.url = url
        self.queue = queue
        self.store = store
        self.logs = logs
        self.concurrency = concurrency
        self.grace = grace
        self.extra = extra
        self.procs: list[subprocess.Popen[bytes]] = []
        self.started = 0
        self.kills = 0
        for _ in range(processes):
            self.procs.append(self._start())

    def _start(self) -> subprocess.Popen[bytes]:
        self.started += 1
        log = (self.logs / f"worker{self.started}.log").open("wb")
        return subprocess.Popen(
            [sys.executable, "-m", "hailq.cli.worker", "fault_handlers:effect",
             "--queue", self.queue, "--url", self.url, "--concurrency", str(self.concurrency),
             "--grace", str(self.grace), "--log-level", "WARNING", *self.extra],
            env=worker_env(self.store), stdout=subprocess.DEVNULL, stderr=log,
            cwd=self.logs, start_new_session=True)  # a group of its own: see kill_all

    def kill_one(self, rng: random.Random) -> None:
        """SIGKILL a random worker and start a new one in its place."""
        i = rng.randrange(len(self.procs))
        proc = self.procs[i]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        self.kills += 1
        self.procs[i] = self._start()

    def restart_dead(self) -> int:
        """Start a new worker for each one that exited by itself; return how many."""
        n = 0
        for i, proc in enumerate(self.procs):
            if proc.poll() is not None:
                self.procs[i] = self._start()
                n += 1
        return n

    def stop(self, timeout: float = 30.0) -> list[int | None]:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        codes: list[int | None] = []
        for proc in self.procs:
            try:
                codes.append(proc.wait(timeout))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
                codes.append(None)
        return codes

    def kill_all(self) -> None:
        """SIGKILL every worker and its children (``--pool process``), whatever their state."""
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def log_tail(self, chars: int = 3000) -> str:
        out = []
        for log in sorted(self.logs.glob("worker*.log")):
            text = log.read_text(errors="replace")
            if text.strip():
                out.append(f"--- {log.name} ---\n{text[-chars:]}")
        return "\n".join(out)


@contextmanager
def fleet(*args: object, **kwargs: object) -> Iterator[WorkerFleet]:
    f = WorkerFleet(*args, **kwargs)  # type: ignore[arg-type]
    try:
        yield f
    finally:
        f.kill_all()


def send_numbered(queue: hailq.Queue, ledger: Ledger, start: int, count: int, *,
                  work: float = 0.0, batch: int = 1000) -> None:
    """Send messages ``start .. start+count-1`` in atomic batches and note them in the ledger."""
    for first in range(start, start + count, batch):
        numbers = list(range(first, min(first + batch, start + count)))
        bodies = [{"n": n, "work": work} if work else {"n": n} for n in numbers]
        ledger.add(queue.send_many(bodies), numbers)


def unfinished(queue: hailq.Queue) -> int:
    s = queue.stats()
    return s.ready + s.scheduled + s.in_flight + s.blocked


@dataclass
class StormResult:
    seconds: float = 0.0
    kills: int = 0
    starts: int = 0
    drained: bool = False
    stats: hailq.QueueStats | None = None
    progress: list[tuple[float, int]] = field(default_factory=list)


def crash_storm(queue: hailq.Queue, f: WorkerFleet, *, kill_every: float, timeout: float,
                seed: int = 0, stop_killing_after: float | None = None) -> StormResult:
    """SIGKILL a random worker every ``kill_every`` s (and restart it) until the queue is done.

    ``stop_killing_after`` seconds ends the storm early (the rest drains calmly); the
    storm always ends at ``timeout``.
    """
    rng = random.Random(seed)
    result = StormResult()
    t0 = time.monotonic()
    next_kill = t0 + kill_every
    while time.monotonic() - t0 < timeout:
        now = time.monotonic()
        left = unfinished(queue)
        result.progress.append((round(now - t0, 1), left))
        if left == 0:
            result.drained = True
            break
        storming = stop_killing_after is None or now - t0 < stop_killing_after
        if storming and now >= next_kill:
            f.kill_one(rng)
            next_kill = now + kill_every
        f.restart_dead()
        time.sleep(0.1)
    result.seconds = time.monotonic() - t0
    result.kills = f.kills
    result.starts = f.started
    result.stats = queue.stats()
    return result
