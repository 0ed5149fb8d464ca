"""The driver suite's fixtures: one migrated ``Backend`` per storage, called at the seam.

``store`` runs each ``test_driver_*`` scenario on SQLite and on PostgreSQL (a schema
of its own per test, dropped after), each through the sync driver and through
``hailq.aio``'s (``aio_bridge.py``: the same core on psycopg's async connections in a
greenlet, or in SQLite threads of the async broker's own; waits on the event loop).
The suite builds ``NewMessage`` and the other params objects itself and never goes
through ``Queue`` or ``Broker``: a step of the choreography or a dialect statement
that drifts shows up here, on the backend it broke, whatever the public API happens
to call.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest

from aio_bridge import DrivenBackend, LoopThread
from conftest import PG_URL, drop_schema, require_postgres
from hailq.backends.base import (
    Backend,
    ClaimedRow,
    ClaimParams,
    NewMessage,
    QueueSaveParams,
    Receipt,
    SendParams,
)
from hailq.backends.postgres.backend import PostgresBackend
from hailq.backends.sql import SqlBackend
from hailq.backends.sqlite.backend import SQLiteBackend
from hailq.codec import encode_body
from hailq.ids import new_message_id
from hailq.settings import QueueSettings
from waiting import wait_past

LEASE = 0.2  # seconds: a lease the tests let end

# How the running test lets time pass on its store's clock (``pass_time``): on SQLite the
# backends' injected clock moves on at once; on PostgreSQL the database's clock rules.
_PASS: list[Callable[[float], None]] = []


@dataclass
class Store:
    """One database under test: its backend, and what a test needs beside the seam."""

    kind: str  # "sqlite" or "postgres"
    backend: Backend
    open: Callable[[], Backend]  # another backend on the same database (another process)
    rows: Callable[[], Any]  # every message and counter row as stored, with row versions
    # A connection of the application's own to the same database, opened the driver's
    # default way: sqlite3 and psycopg both begin a transaction at the first write.
    connect: Callable[[], Any]
    table: str  # a name for a table of a test's own (an effect, rule 22)


def _sqlite(tmp_path: Path, loop: LoopThread | None) -> Iterator[Store]:
    path = str(tmp_path / "hailq.db")
    backends: list[Backend] = []
    skew = [0.0]  # one machine, one clock: every backend of the store reads this one

    def open_backend() -> Backend:
        b: Backend = SQLiteBackend(path, clock=lambda: time.time() + skew[0])
        if loop is not None:
            from hailq.aio.drivers import ThreadDriver

            sync = b
            b = cast(Backend, DrivenBackend(loop.call(lambda: ThreadDriver(
                cast(SqlBackend, sync), loop.loop, path, 0.005)), loop))
        backends.append(b)
        return b

    backend = open_backend()
    backend.schema_migrate()
    raw = sqlite3.connect(f"{Path(path).as_uri()}?mode=ro", uri=True, isolation_level=None)

    def rows() -> Any:
        # data_version changes when any other connection commits, a no-op update included.
        version = raw.execute("PRAGMA data_version").fetchone()[0]
        return (version,
                raw.execute("SELECT * FROM hailq_messages ORDER BY seq").fetchall(),
                raw.execute("SELECT * FROM hailq_counters ORDER BY queue").fetchall())

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(path, timeout=10)

    _PASS[:] = [lambda seconds: skew.__setitem__(0, skew[0] + seconds)]
    yield Store("sqlite", backend, open_backend, rows, connect, "effects")
    _PASS.clear()
    raw.close()
    for b in backends:
        b.close()


def _postgres(loop: LoopThread | None) -> Iterator[Store]:
    require_postgres()
    schema = f"hailq_t_{uuid.uuid4().hex[:12]}"
    backends: list[Backend] = []

    def open_backend() -> Backend:
        b: Backend
        if loop is None:
            b = PostgresBackend(PG_URL, display="postgresql://test", schema=schema)
        else:
            from hailq.aio.drivers import GreenletDriver
            from hailq.aio.postgres import AsyncPostgresDialect

            b = cast(Backend, DrivenBackend(GreenletDriver(SqlBackend(AsyncPostgresDialect(
                PG_URL, loop=loop.loop, display="postgresql://test", schema=schema)),
                loop.loop), loop))
        backends.append(b)
        return b

    raw = psycopg.connect(PG_URL, autocommit=True)
    try:
        backend = open_backend()
        backend.schema_migrate()

        def rows() -> Any:
            # xmin is the row version: any write, a no-op update included, changes it.
            return (raw.execute(f'SELECT xmin::text, * FROM "{schema}".messages '
                                "ORDER BY seq").fetchall(),
                    raw.execute(f'SELECT xmin::text, * FROM "{schema}".counters '
                                "ORDER BY queue, shard").fetchall())

        def connect() -> psycopg.Connection[Any]:
            return psycopg.connect(PG_URL)

        _PASS[:] = [lambda seconds: wait_past(backend.clock_now, backend.clock_now() + seconds,
                                              seconds + 10)]
        yield Store("postgres", backend, open_backend, rows, connect, f'"{schema}".effects')
    finally:
        _PASS.clear()
        for b in backends:
            b.close()
        raw.close()
        drop_schema(schema)


# The async drivers' runs are marked slow: .ci/run runs them after make test.
@pytest.fixture(params=["sqlite", "postgres", pytest.param("sqlite-aio", marks=pytest.mark.slow),
                        pytest.param("postgres-aio", marks=pytest.mark.slow)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    kind = str(request.param)
    loop = LoopThread() if kind.endswith("-aio") else None
    try:
        if kind.startswith("sqlite"):
            yield from _sqlite(tmp_path, loop)
        else:
            yield from _postgres(loop)
    finally:
        if loop is not None:
            loop.stop()


@pytest.fixture
def backend(store: Store) -> Backend:
    """A migrated backend, empty."""
    return store.backend


# -- building params --------------------------------------------------------------------------


def message(queue: str, body: Any = None, *, priority: int = 0,
            ordering_key: str | None = None, delay: float = 0.0,
            dedup_id: str | None = None, headers: str | None = None) -> NewMessage:
    """A message as the public API hands it to the seam: validated and encoded."""
    data, kind = encode_body(body, 1 << 20)
    return NewMessage(queue=queue, id=new_message_id(), body=data, body_kind=kind,
                      headers=headers, priority=priority, ordering_key=ordering_key,
                      delay=delay, dedup_id=dedup_id)


def save(backend: Backend, queue: str, **settings: Any) -> QueueSettings:
    """Declare ``queue`` (or change its settings) as an operator would."""
    wanted = QueueSettings.build(**settings)
    backend.queue_save(QueueSaveParams(queue, wanted.to_json()))
    return wanted


def send(backend: Backend, queue: str, *bodies: Any, **fields: Any) -> list[str]:
    return backend.message_send(SendParams([message(queue, b, **fields) for b in bodies]))


def claim(backend: Backend, queue: str, n: int = 1,
          lease: float | None = None) -> list[ClaimedRow]:
    return backend.message_claim(ClaimParams(queue, n, lease)).rows


def receipt(queue: str, row: ClaimedRow, *, seq: bool = True) -> Receipt:
    return Receipt(queue, row.id, row.token, row.seq if seq else None)


def pass_time(seconds: float) -> None:
    """Let ``seconds`` pass on the store's clock (leases end, delays come due, upkeep is due):
    on SQLite at once, through the injected clock; on PostgreSQL by a bounded wait."""
    _PASS[0](seconds)


def outlive(lease: float = LEASE) -> None:
    """Let a lease of ``lease`` seconds taken just now end."""
    pass_time(lease + 0.05)


def lapsed(backend: Backend, queue: str) -> tuple[Receipt, Receipt]:
    """One message received, its lease ended, received again: (stale, current)."""
    [first] = claim(backend, queue, lease=LEASE)
    outlive()
    [again] = claim(backend, queue, lease=30)
    assert again.id == first.id and again.attempt == 2
    return receipt(queue, first), receipt(queue, again)


@contextlib.contextmanager
def unchanged(store: Store) -> Iterator[None]:
    """The block writes nothing: every message and counter row stays as it was."""
    before = store.rows()
    yield
    assert store.rows() == before


@contextlib.contextmanager
def caller_transaction(store: Store, style: str, commit: bool) -> Iterator[Any]:
    """The application's own transaction, for ``connection=`` (rule 3). ``explicit``
    begins it first (BEGIN; psycopg's ``transaction()`` block); ``implicit`` hands over
    a connection that is idle, as the driver opened it, and lets the first statement
    begin the transaction. Either way it commits or rolls back after the block."""
    conn = store.connect()
    try:
        if style == "explicit" and store.kind == "postgres":
            with conn.transaction():
                yield conn
                if not commit:
                    raise psycopg.Rollback
            return
        if style == "explicit":
            conn.execute("BEGIN IMMEDIATE")
        yield conn
        if commit:
            conn.commit()
        else:
            conn.rollback()
    finally:
        conn.close()


