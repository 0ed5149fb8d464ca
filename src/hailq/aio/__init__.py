"""hailq for asyncio: the sync API's names and arguments, every call that touches the
database awaited (SPEC rule 37).

>>> import hailq.aio
>>> async def main() -> None:
...     async with hailq.aio.connect("sqlite:///claims.db") as broker:
...         claims = await broker.queue("claims", lease=30)
...         await claims.send({"claim": 8311})
...         for message in await claims.receive(max_messages=10, wait=5):
...             await message.ack()

One implementation serves both APIs: the storage core and the public objects are
the sync ones, driven on PostgreSQL by greenlets over psycopg's async connections
and on SQLite by a few threads of the broker's own (``drivers.py``). See
docs/guides/asyncio.md.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Generator, Sequence
from typing import Any, cast

from hailq._time import Clock
from hailq.aio.api import AsyncBroker, AsyncMessage, AsyncQueue, AsyncTopic
from hailq.aio.drivers import (
    Driver,
    GreenletDriver,
    SyncCallOnLoop,
    ThreadDriver,
    WrongEventLoop,
)
from hailq.backends.registry import _postgres_settings, _sqlite_settings, lookup
from hailq.backends.sql import SqlBackend
from hailq.broker import Broker
from hailq.errors import InvalidArgument
from hailq.hooks import Hook
from hailq.url import DEFAULT_URL, split_url

__all__ = ["AsyncBroker", "AsyncMessage", "AsyncQueue", "AsyncTopic", "SyncCallOnLoop",
           "WrongEventLoop", "beside", "connect"]


class connect:
    """Open an async broker: ``broker = await hailq.aio.connect(url)``, or ``async with
    hailq.aio.connect(url) as broker`` (closed at the block's end). The URL, its options
    and the keywords are ``hailq.connect``'s."""

    def __init__(self, url: str | None = None, *, clock: Clock | None = None,
                 migrate: bool = True, figures: bool = True,
                 hooks: Sequence[Hook] = ()) -> None:
        self._args = (url, clock, migrate, figures, hooks)
        self._broker: AsyncBroker | None = None

    def __await__(self) -> Generator[Any, None, AsyncBroker]:
        return _open(*self._args).__await__()

    async def __aenter__(self) -> AsyncBroker:
        self._broker = await _open(*self._args)
        return self._broker

    async def __aexit__(self, *exc: object) -> None:
        if self._broker is not None:
            broker, self._broker = self._broker, None
            await broker.close()


async def _open(url: str | None, clock: Clock | None, migrate: bool, figures: bool,
                hooks: Sequence[Hook]) -> AsyncBroker:
    loop = asyncio.get_running_loop()
    split = split_url(url if url is not None else os.environ.get("HAILQ_URL", DEFAULT_URL))
    kind = lookup(split)
    parsed = kind.parse(split)
    driver: Driver
    if kind.name == "SQLite":
        backend = cast(SqlBackend, kind.open(parsed, clock))
        driver = ThreadDriver(backend, loop, os.path.abspath(parsed.target), float(
            _sqlite_settings(parsed).get("poll_interval", 0.005)))
    else:
        if clock is not None:
            raise InvalidArgument("PostgreSQL uses the database clock; clock= is for SQLite")
        from hailq.aio.postgres import AsyncPostgresDialect

        backend = SqlBackend(AsyncPostgresDialect(parsed.target, loop=loop,
                                                  display=parsed.display,
                                                  **_postgres_settings(parsed)))
        driver = GreenletDriver(backend, loop)
    try:
        broker = AsyncBroker(Broker(backend, figures=figures, clock=clock, hooks=hooks),
                             driver)
        if migrate:
            await broker.migrate()
    except BaseException:
        await driver.close()
        raise
    return broker


async def beside(broker: Broker) -> AsyncBroker:
    """An async broker for the running event loop on the database of the sync
    ``broker``, sharing its hooks and figures recorder (``hailq serve`` receives through
    it). Closing it leaves ``broker`` open; ``broker`` is closed apart."""
    loop = asyncio.get_running_loop()
    backend = broker.backend
    if not isinstance(backend, SqlBackend):
        raise InvalidArgument(f"no async driver for {type(backend).__name__}")
    dialect = backend.dialect
    driver: Driver
    from hailq.backends.sqlite.backend import SQLiteDialect

    if isinstance(dialect, SQLiteDialect):
        # The same backend: its connections are per thread, the driver's threads its own.
        driver = ThreadDriver(backend, loop, dialect.path, dialect._poll_interval)
        return AsyncBroker(broker, driver, shares=True)
    from hailq.aio.postgres import AsyncPostgresDialect
    from hailq.backends.postgres.backend import PostgresDialect

    assert isinstance(dialect, PostgresDialect)
    own = SqlBackend(AsyncPostgresDialect.beside(dialect, loop))
    # One process, one view of the stored settings: a pause or change made through
    # ``broker`` applies at once to what the async one claims (rule 32).
    own.shared.settings, own.shared.maintained = backend.shared.settings, backend.shared.maintained
    sync = Broker(own, figures=False)
    sync.figures, sync.hooks = broker.figures, broker.hooks  # shared, not copied
    return AsyncBroker(sync, GreenletDriver(own, loop), shares=True)
