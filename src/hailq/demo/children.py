"""Helper processes of the demo (``hailq.demo.roles``) and the JSON lines they report."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

Line = dict[str, Any]


class Child:
    """One ``python -m hailq.demo.roles ROLE ...`` process; its lines go to ``on_line``.

    ``name`` (default: the role) names its log file, ``NAME.log`` in ``log_dir``.
    """

    def __init__(self, role: str, args: list[str], log_dir: Path,
                 on_line: Callable[[Line], None] | None = None, name: str | None = None
                 ) -> None:
        self.role = name or role
        self.lines: list[Line] = []
        self._on_line = on_line
        self._log: IO[bytes] = open(log_dir / f"{self.role}.log", "wb")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hailq.demo.roles", role, *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True)
        self._reader = threading.Thread(target=self._read, name=f"demo-{self.role}",
                                        daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for text in self.process.stdout:
            line: Line = json.loads(text)
            self.lines.append(line)
            if self._on_line is not None:
                self._on_line(line)

    def tell(self, text: str) -> None:
        """One line on the process's stdin; nothing if the process is gone (see its log)."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(text + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError):  # ValueError: stdin already closed
            pass

    def finish(self, timeout: float) -> None:
        """Close its stdin (the end of its commands) and wait up to ``timeout`` for its exit."""
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout)

    def wait_for(self, key: str, timeout: float) -> Line:
        """The first line that has ``key``, waiting up to ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if key in line:
                    return line
            if self.finished:
                break
            time.sleep(0.005)
        raise RuntimeError(f"the {self.role} process did not report {key!r} "
                           f"(exit code {self.process.poll()}); see {self._log.name}")

    @property
    def finished(self) -> bool:
        return self.process.poll() is not None and not self._reader.is_alive()

    def stop(self) -> None:
        """End the process if it still runs, and release its pipes."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)
        self._reader.join(5)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                with contextlib.suppress(BrokenPipeError):
                    pipe.close()
        self._log.close()
