"""Real ``hailq worker`` processes for the worker benchmarks, started and stopped from
outside as an operator would."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from types import TracebackType

import hailq

QUEUE = "bench_workers"


@dataclass(eq=False)
class WorkerProcesses:
    """``procs`` × ``hailq worker TARGET -c CONCURRENCY`` on the bench queue.

    Entering starts them and waits until the registry lists each as running;
    leaving stops them with SIGTERM and checks every one exits 0 (``stop()``),
    or kills them if the block raised.
    """

    url: str
    target: str
    _: KW_ONLY
    procs: int
    concurrency: int
    log_dir: Path
    start_timeout: float = 60.0
    popens: list[subprocess.Popen[bytes]] = field(default_factory=list, init=False)
    _logs: list[Path] = field(default_factory=list, init=False)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.popens]

    def __enter__(self) -> WorkerProcesses:
        try:
            self.start()
        except BaseException:
            self.kill()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.stop()
        else:
            self.kill()

    def start(self) -> None:
        command = [sys.executable, "-m", "hailq.cli.worker", self.target, "--queue", QUEUE,
                   "--concurrency", str(self.concurrency), "--url", self.url,
                   "--log-level", "WARNING"]
        for _ in range(self.procs):
            log = self.log_dir / f"worker-{len(self._logs)}-{time.time_ns()}.log"
            self._logs.append(log)
            with open(log, "wb") as err:
                self.popens.append(subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                                    stdout=err, stderr=subprocess.STDOUT))
        with hailq.connect(self.url) as broker:
            deadline = time.monotonic() + self.start_timeout
            while True:
                running = {w.pid for w in broker.workers() if w.state == "running"}
                if running.issuperset(self.pids):
                    return
                for popen, log in zip(self.popens, self._logs, strict=True):
                    if popen.poll() is not None:
                        raise RuntimeError(f"worker {popen.pid} exited with {popen.returncode} "
                                           f"before it was running: {_tail(log)}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"workers {self.pids} not registered as running after "
                                       f"{self.start_timeout:g} s")
                time.sleep(0.02)

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM every worker; RuntimeError unless each exits 0 within ``timeout``."""
        for popen in self.popens:
            if popen.poll() is None:
                popen.send_signal(signal.SIGTERM)
        problems = []
        for popen, log in zip(self.popens, self._logs, strict=True):
            try:
                code = popen.wait(timeout)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()
                problems.append(f"worker {popen.pid} still running {timeout:g} s after SIGTERM")
                continue
            if code != 0:
                problems.append(f"worker {popen.pid} exited {code}: {_tail(log)}")
        self.popens = []
        if problems:
            raise RuntimeError("; ".join(problems))

    def kill(self) -> None:
        for popen in self.popens:
            if popen.poll() is None:
                popen.kill()
            popen.wait()
        self.popens = []


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(empty log)"
