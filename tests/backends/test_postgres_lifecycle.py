"""A PostgreSQL broker dropped without ``close()`` still closes what it opened.

Its pools and listener close when the broker is collected, from whichever
thread the collection runs in (one of their own threads included, which
cannot join itself), and nothing reaches ``sys.unraisablehook``.
"""

from __future__ import annotations

import gc
import sys
import threading
from typing import Any

import pytest

import hailq
from waiting import wait_until

# Threads another test of this process left running (a worker's, a server's) are not
# this test's broker's: only the threads started during the test count.
_before: set[threading.Thread] = set()


@pytest.fixture(autouse=True)
def _threads_before() -> None:
    _before.clear()
    _before.update(threading.enumerate())


def _hailq_threads() -> list[str]:
    return [t.name for t in threading.enumerate()
            if t.name.startswith("hailq-") and t not in _before]


def _wait_for_no_threads(timeout: float = 5.0) -> list[str]:
    wait_until(lambda: not _hailq_threads(), timeout, step=0.05)
    return _hailq_threads()


def _drop_a_used_broker(url: str) -> None:
    broker = hailq.connect(url)
    broker.cycle = broker  # type: ignore[attr-defined]  # only the collector frees it
    q = broker.queue("dropped")
    q.send({"n": 1})
    [m] = q.receive(wait=0.1)
    m.ack()
    q.receive(wait=0.1)  # the listener thread too


def _collect_in(thread_name: str) -> None:
    t = threading.Thread(target=gc.collect, name=thread_name)
    t.start()
    t.join()


def test_a_dropped_broker_closes_its_pools_wherever_it_is_collected(
        pg_url: str, monkeypatch: Any) -> None:
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    hailq.connect(pg_url).close()
    assert _wait_for_no_threads() == []
    for collector in ("MainThread", "hailq-fast-worker-0", "hailq-listen"):
        _drop_a_used_broker(pg_url)
        assert _hailq_threads()
        if collector == "MainThread":
            gc.collect()
        else:
            _collect_in(collector)
        assert _wait_for_no_threads() == [], collector
    assert unraisable == []
