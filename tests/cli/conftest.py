"""Helpers for the CLI tests: every command runs as a real ``hailq`` process of its own
(forked from a server that has the CLI imported: ``tests/zygote.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import hailq
from zygote import ZYGOTE


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        assert self.code == 0, self.err
        return json.loads(self.out)

    def assert_clean_error(self, code: int | None = None) -> str:
        """A failure: non-zero exit (``code`` if given), nothing on stdout, one
        'hailq: error:' line on stderr."""
        assert self.code != 0, self.out
        assert code is None or self.code == code, (self.code, self.err)
        assert self.out == ""
        lines = self.err.splitlines()
        assert len(lines) == 1, self.err
        assert lines[0].startswith("hailq: error: "), self.err
        assert "Traceback" not in self.err
        return lines[0]


Hailq = Callable[..., Result]


def run_hailq(*args: str, url: str | None = None, stdin: str | None = None,
              cwd: Path | None = None, env: dict[str, str] | None = None,
              timeout: float = 120) -> Result:
    environment = {k: v for k, v in os.environ.items() if k != "HAILQ_URL"}
    environment.update(env or {})
    argv = [*args, *(["--url", url] if url is not None else [])]
    if not os.environ.get("HAILQ_TEST_SUBPROCESS"):  # a process forked per command
        code, out, err = ZYGOTE.run(argv, environment, str(cwd or os.getcwd()), stdin,
                                    timeout)
        return Result(code, out, err)
    command = [sys.executable, "-m", "hailq.cli.main", *argv]
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, cwd=cwd,
                          env=environment, timeout=timeout,
                          stdin=None if stdin is not None else subprocess.DEVNULL)
    return Result(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def hq(sqlite_url: str) -> Hailq:
    """Run hailq against a fresh SQLite file: ``hq("queues", "--json")``."""
    def run(*args: str, **kwargs: Any) -> Result:
        kwargs.setdefault("url", sqlite_url)
        return run_hailq(*args, **kwargs)
    return run


@pytest.fixture
def hq_any(url: str) -> Hailq:
    """Like ``hq``, on every backend."""
    def run(*args: str, **kwargs: Any) -> Result:
        kwargs.setdefault("url", url)
        return run_hailq(*args, **kwargs)
    return run


@pytest.fixture
def api_any(url: str) -> Iterator[hailq.Broker]:
    """The same database through the Python API, to arrange and check state."""
    broker = hailq.connect(url)
    yield broker
    broker.close()


@pytest.fixture
def api(sqlite_url: str) -> Iterator[hailq.Broker]:
    broker = hailq.connect(sqlite_url)
    yield broker
    broker.close()


def kill_messages(broker: hailq.Broker, queue: str, bodies: list[Any],
                  errors: list[str], ordering_key: str | None = None) -> list[str]:
    """Send ``bodies`` to a one-attempt queue and fail each once with its error: all dead."""
    q = broker.queue(queue, max_attempts=1)
    ids = [q.send(b, ordering_key=ordering_key) for b in bodies]
    for error in errors:
        (message,) = q.receive()
        message.nack(error=error)
    return ids
