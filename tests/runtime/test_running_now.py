"""What each worker runs now (issue "Operate it like the best job dashboards", point 8):
the registry's report names the message in each busy slot, shown by ``broker.workers()``,
``hailq workers`` and the dashboard's workers page; both backends."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

import hailq
from hailq.runtime import App, Worker

from .support import wait_for


@pytest.fixture
def busy(broker: hailq.Broker, url: str) -> Iterator[tuple[Worker, list[str]]]:
    """A worker of 2 slots whose handler holds its message until released."""
    release = threading.Event()
    app = App()

    @app.handler("claims")
    def check(message: hailq.Message) -> None:
        release.wait(30)

    ids = broker.queue("claims").send_many([{"claim": 4711}, {"claim": 4712}])
    worker = Worker(broker, app, concurrency=2, poll=0.2, registry_interval=0.2)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    yield worker, ids
    release.set()
    worker.stop()
    thread.join(10)


def test_the_registry_names_the_message_in_each_slot(
        broker: hailq.Broker, busy: tuple[Worker, list[str]], url: str) -> None:
    worker, ids = busy

    def running() -> list[hailq.RunningMessage]:
        return [r for w in broker.workers() if w.id == worker.worker_id for r in w.running]

    wait_for(lambda: len(running()) == 2, what="both slots reported busy")
    now = broker.now()
    assert sorted(r.message_id for r in running()) == sorted(ids)
    assert all(r.queue == "claims" and r.attempt == 1 and r.since <= now for r in running())
    shown = subprocess.run([sys.executable, "-m", "hailq.cli.main", "workers", "--url", url],
                           capture_output=True, text=True, timeout=60,
                           env={**os.environ, "COLUMNS": "100"})
    assert shown.returncode == 0, shown.stderr
    after = shown.stdout.split("running now", 1)[1]
    assert all(i in after for i in ids)
