"""Fixtures of the conformance suite, on top of ``tests/conftest.py``'s ``broker`` and ``url``."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import hailq

from .helpers import SKEWS, RawDatabase


@pytest.fixture
def raw(backend_name: str, url: str) -> RawDatabase:
    """The broker's database opened with the plain driver (sqlite3 or psycopg)."""
    return RawDatabase(backend_name, url)


@pytest.fixture
def broker(url: str, backend_name: str) -> Iterator[hailq.Broker]:
    """The suite's broker. On SQLite its clock is injected (real time plus a skew that
    ``helpers.advance`` moves on), so a test lets a lease end without waiting for it."""
    if backend_name != "sqlite":
        with hailq.connect(url) as b:
            yield b
        return
    skew = [0.0]
    b = hailq.connect(url, clock=lambda: time.time() + skew[0])
    SKEWS[id(b)] = skew
    try:
        yield b
    finally:
        del SKEWS[id(b)]
        b.close()
