"""Fixtures of the conformance suite, on top of ``tests/conftest.py``'s ``broker`` and ``url``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import cast

import pytest

import hailq
import hailq.aio
from aio_bridge import LoopThread, Synced

from .helpers import SKEWS, RawDatabase


@pytest.fixture
def raw(backend_name: str, url: str) -> RawDatabase:
    """The broker's database opened with the plain driver (sqlite3 or psycopg)."""
    return RawDatabase(backend_name, url)


@pytest.fixture(params=["sync", "aio"])
def api(request: pytest.FixtureRequest) -> str:
    """Which API the scenario runs through: the sync one, or ``hailq.aio`` behind a sync
    face (``aio_bridge.Synced``), rule 37."""
    return str(request.param)


@pytest.fixture
def broker(url: str, backend_name: str, api: str) -> Iterator[hailq.Broker]:
    """The suite's broker. On SQLite its clock is injected (real time plus a skew that
    ``helpers.advance`` moves on), so a test lets a lease end without waiting for it."""
    skew = [0.0]
    clock = None if backend_name != "sqlite" else (lambda: time.time() + skew[0])
    if api == "aio":
        loop = LoopThread()
        b = cast(hailq.Broker, Synced(loop.run(hailq.aio.connect(url, clock=clock)), loop))
    else:
        b = hailq.connect(url, clock=clock)
    if clock is not None:
        SKEWS[id(b)] = skew
    try:
        yield b
    finally:
        SKEWS.pop(id(b), None)
        b.close()
        if api == "aio":
            loop.stop()
