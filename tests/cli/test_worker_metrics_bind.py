"""``hailq worker --metrics-port``: PORT alone binds 127.0.0.1, as everything hailq
serves unless told otherwise; ``HOST:PORT`` binds as told (issue 33, point 10)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import hailq
from ports import free_port
from waiting import wait_for

HANDLER = "def handle(message):\n    pass\n"
# Another loopback address: Linux answers on all of 127.0.0.0/8. A listener bound to
# 127.0.0.1 is not reached there; one bound to every interface is.
ELSEWHERE = "127.0.0.2"
Start = Callable[..., "subprocess.Popen[bytes]"]


def answers(host: str, port: int) -> int:
    """The status of /healthz at host:port, 0 when nothing accepts the connection."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


@pytest.fixture
def worker(url: str, tmp_path: Path) -> Iterator[Start]:
    with hailq.connect(url) as broker:
        broker.queue("claims")
    (tmp_path / "jobs.py").write_text(HANDLER)
    started: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if k != "HAILQ_URL"}
        process = subprocess.Popen(
            [sys.executable, "-m", "hailq.cli.main", "worker", "jobs:handle", "-q",
             "claims", "--url", url, *args], cwd=tmp_path, env=env,
            stdout=subprocess.DEVNULL, stderr=(tmp_path / "worker.log").open("w"))
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    print((tmp_path / "worker.log").read_text()[-3000:])


def wait_healthy(host: str, port: int, process: subprocess.Popen[bytes]) -> None:
    wait_for(lambda: process.poll() is not None or answers(host, port) == 200, 60,
             what="the worker to answer /healthz", step=0.1)
    assert process.poll() is None, "the worker exited"


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_port_alone_binds_loopback_only(worker: Start, pool: str) -> None:
    port = free_port()
    process = worker("--metrics-port", str(port), "--pool", pool)
    wait_healthy("127.0.0.1", port, process)
    assert answers(ELSEWHERE, port) == 0
    with socket.socket() as other:  # the port is free on every other address
        other.bind((ELSEWHERE, port))
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0


def test_host_and_port_bind_as_told(worker: Start) -> None:
    port = free_port()
    process = worker("--metrics-port", f"0.0.0.0:{port}")
    wait_healthy("127.0.0.1", port, process)
    assert answers(ELSEWHERE, port) == 200
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0
    port = free_port()
    process = worker("--metrics-port", f"{ELSEWHERE}:{port}")
    wait_healthy(ELSEWHERE, port, process)
    assert answers("127.0.0.1", port) == 0
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0
