"""Fixtures of the figures' tests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

import hailq
from waiting import wait_past


@pytest.fixture
def clocked(url: str, backend_name: str) -> Iterator[tuple[hailq.Broker, Any]]:
    """A broker and how to let time pass on its clock: on SQLite its injected clock moves
    on at once; on PostgreSQL the database's clock rules, so a bounded wait."""
    skew = [0.0]
    b = hailq.connect(url, clock=(lambda: time.time() + skew[0])
                      if backend_name == "sqlite" else None)

    def advance(seconds: float) -> None:
        if backend_name == "sqlite":
            skew[0] += seconds
        else:
            wait_past(b.now, b.now() + seconds, seconds + 10)

    yield b, advance
    b.close()
