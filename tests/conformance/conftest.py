"""Fixtures of the conformance suite, on top of ``tests/conftest.py``'s ``broker`` and ``url``."""

from __future__ import annotations

import pytest

from .helpers import RawDatabase


@pytest.fixture
def raw(backend_name: str, url: str) -> RawDatabase:
    """The broker's database opened with the plain driver (sqlite3 or psycopg)."""
    return RawDatabase(backend_name, url)
