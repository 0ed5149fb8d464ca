"""The inbox in the user's own stack (SPEC rules 21, 38), against real servers: for each
connection users hold, an effect committed with its record is recorded once, a rolled
back one leaves nothing, and a redelivered message finds its record.

One scenario, written once for blocking stacks and once awaited: each stack gives a
``transaction()`` that yields the connection the application would hand to hailq.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any

import pytest

import hailq
from hailq.inbox import AsyncInbox, Inbox
from stacks.conftest import MARIADB, Place

Sync = Callable[[], AbstractContextManager[Any]]
Async = Callable[[], AbstractAsyncContextManager[Any]]


class Boom(Exception):
    """The application's failure after its effect was written."""


def scenario(transaction: Sync, effects: Callable[[], list[str]],
             mark: str = "%s") -> None:
    insert = f"INSERT INTO effects (message_id) VALUES ({mark})"
    for attempt in range(2):  # the second is the redelivery of the same message
        with transaction() as conn:
            box = hailq.inbox(conn, "billing")
            assert isinstance(box, Inbox)
            if box.record("m-1"):
                assert attempt == 0
                _execute(conn, insert, ("m-1",))
            else:
                assert attempt == 1 and box.seen("m-1")
    with pytest.raises(Boom), transaction() as conn:
        assert hailq.inbox(conn, "billing").record("m-2")
        _execute(conn, insert, ("m-2",))
        raise Boom
    with transaction() as conn:
        box = hailq.inbox(conn, "billing")
        assert not box.seen("m-2")  # rolled back with its effect
        assert hailq.inbox(conn, "audit").record("m-1")  # another consumer's own record
    assert effects() == ["m-1"]


async def scenario_async(transaction: Async, effects: Callable[[], list[str]],
                         run: Callable[[Any, str, tuple[Any, ...]], Any]) -> None:
    for attempt in range(2):
        async with transaction() as conn:
            box = hailq.inbox(conn, "billing")
            assert isinstance(box, AsyncInbox)
            if await box.record("m-1"):
                assert attempt == 0
                await run(conn, "INSERT INTO effects (message_id) VALUES ({})", ("m-1",))
            else:
                assert attempt == 1 and await box.seen("m-1")
    with pytest.raises(Boom):
        async with transaction() as conn:
            assert await hailq.inbox(conn, "billing").record("m-2")
            await run(conn, "INSERT INTO effects (message_id) VALUES ({})", ("m-2",))
            raise Boom
    async with transaction() as conn:
        assert not await hailq.inbox(conn, "billing").seen("m-2")
    assert effects() == ["m-1"]


def _execute(conn: Any, sql: str, params: tuple[Any, ...]) -> None:
    """The application's own write, the way its stack writes."""
    if hasattr(conn, "exec_driver_sql"):
        conn.exec_driver_sql(sql, params)
    elif hasattr(conn, "connection") and hasattr(conn, "get_bind"):  # a Session
        conn.connection().exec_driver_sql(sql, params)
    else:
        cur = conn.cursor()
        cur.execute(sql, params)
        cur.close()


# -- who reads the effects back: a fresh connection of the database's own driver ----------

def sqlite_effects(place: Place) -> Callable[[], list[str]]:
    def read() -> list[str]:
        with contextlib.closing(sqlite3.connect(place.sqlite)) as conn:  # type: ignore[arg-type]
            return [r[0] for r in conn.execute("SELECT message_id FROM effects")]
    return read


def pg_effects(place: Place) -> Callable[[], list[str]]:
    def read() -> list[str]:
        import psycopg

        with psycopg.connect(place.pg_dsn) as conn:
            return [r[0] for r in conn.execute("SELECT message_id FROM effects")]
    return read


def mysql_effects(place: Place) -> Callable[[], list[str]]:
    def read() -> list[str]:
        import pymysql

        with pymysql.connect(**MARIADB, database=place.mysql_db) as conn:  # type: ignore[arg-type]
            cur = conn.cursor()
            cur.execute("SELECT message_id FROM effects")
            return [r[0] for r in cur.fetchall()]
    return read


# -- blocking stacks -------------------------------------------------------------------------

def test_rule_38_sqlite3(sqlite_place: Place) -> None:
    conn = sqlite3.connect(sqlite_place.sqlite)  # type: ignore[arg-type]

    @contextlib.contextmanager
    def transaction() -> Iterator[sqlite3.Connection]:
        with conn:
            yield conn

    scenario(transaction, sqlite_effects(sqlite_place), mark="?")
    conn.close()


def test_rule_38_psycopg(pg_place: Place) -> None:
    import psycopg

    with psycopg.connect(pg_place.pg_dsn) as conn:
        @contextlib.contextmanager
        def transaction() -> Iterator[psycopg.Connection[Any]]:
            with conn.transaction():
                yield conn

        scenario(transaction, pg_effects(pg_place))


def test_rule_38_psycopg2(pg_place: Place) -> None:
    import psycopg2

    conn = psycopg2.connect(pg_place.pg_dsn)

    @contextlib.contextmanager
    def transaction() -> Iterator[Any]:
        with conn:  # psycopg2: commit on the way out, roll back on an exception
            yield conn

    scenario(transaction, pg_effects(pg_place))
    conn.close()


def _mysql(place: Place, driver: str = "pymysql") -> Any:
    if driver == "mysqlclient":
        import MySQLdb

        return MySQLdb.connect(host=MARIADB["host"], port=MARIADB["port"],
                               user=MARIADB["user"], database=place.mysql_db)
    import pymysql

    return pymysql.connect(**MARIADB, database=place.mysql_db)  # type: ignore[arg-type]


@pytest.mark.parametrize("driver", ["pymysql", "mysqlclient"])
def test_rule_38_mysql_drivers(mysql_place: Place, driver: str) -> None:
    conn = _mysql(mysql_place, driver)
    hailq.inbox(conn, "billing")  # at start-up, outside a transaction: makes the table

    @contextlib.contextmanager
    def transaction() -> Iterator[Any]:
        _execute(conn, "START TRANSACTION", ())
        try:
            yield conn
        except BaseException:
            conn.rollback()
            raise
        conn.commit()

    scenario(transaction, mysql_effects(mysql_place))
    conn.close()


def test_rule_38_mysql_creates_its_table_only_outside_a_transaction(mysql_place: Place) -> None:
    conn = _mysql(mysql_place)
    conn.begin()
    _execute(conn, "INSERT INTO effects (message_id) VALUES (%s)", ("before",))
    with pytest.raises(hailq.InvalidArgument, match="outside a transaction"):
        hailq.inbox(conn, "billing")  # a CREATE here would commit "before"
    conn.rollback()
    assert mysql_effects(mysql_place)() == []
    hailq.inbox(conn, "billing")  # no transaction open: the table is made
    conn.begin()
    assert hailq.inbox(conn, "billing").record("m-1")  # found now, inside one
    conn.commit()
    conn.close()


SA_SYNC_URLS = {"sqlite": lambda p: f"sqlite:///{p.sqlite}",
                "postgres": lambda p: f"postgresql+psycopg://{p.pg_dsn.split('://', 1)[1]}",
                "psycopg2": lambda p: f"postgresql+psycopg2://{p.pg_dsn.split('://', 1)[1]}",
                "mysql": lambda p: f"mysql+pymysql://root@127.0.0.1:3306/{p.mysql_db}",
                "mysqlclient": lambda p: f"mysql+mysqldb://root@127.0.0.1:3306/{p.mysql_db}"}
PLACE_OF = {"sqlite": "sqlite_place", "postgres": "pg_place", "psycopg2": "pg_place",
            "mysql": "mysql_place", "mysqlclient": "mysql_place", "aiomysql": "mysql_place",
            "asyncpg": "pg_place", "psycopg_async": "pg_place"}
EFFECTS_OF = {"sqlite_place": sqlite_effects, "pg_place": pg_effects,
              "mysql_place": mysql_effects}


@pytest.mark.parametrize("kind", ["Connection", "Session"])
@pytest.mark.parametrize("db", sorted(SA_SYNC_URLS))
def test_rule_38_sqlalchemy(db: str, kind: str, request: pytest.FixtureRequest) -> None:
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    place: Place = request.getfixturevalue(PLACE_OF[db])
    engine = create_engine(SA_SYNC_URLS[db](place))
    if db.startswith("mysql"):  # made once outside a transaction, as the inbox asks there
        with engine.connect() as conn:
            hailq.inbox(conn, "billing")
            hailq.inbox(conn, "audit")
            conn.commit()

    @contextlib.contextmanager
    def transaction() -> Iterator[Any]:
        if kind == "Connection":
            with engine.begin() as conn:
                yield conn
        else:
            with Session(engine) as session, session.begin():
                yield session

    scenario(transaction, EFFECTS_OF[PLACE_OF[db]](place),
             mark="?" if db == "sqlite" else "%s")
    engine.dispose()


def test_rule_38_django_needs_an_atomic_block_and_keeps_to_it(sqlite_place: Place, pg_place: Place,
                                                       mysql_place: Place) -> None:
    from stacks.django_setup import configure

    configure({"default": {"ENGINE": "django.db.backends.sqlite3",
                           "NAME": str(sqlite_place.sqlite)},
               "pg": {"ENGINE": "django.db.backends.postgresql", "NAME": "test",
                      "USER": "postgres", "HOST": "127.0.0.1", "PORT": "5432",
                      "OPTIONS": {"options": f"-c search_path={pg_place.pg_schema}"}},
               "my": {"ENGINE": "django.db.backends.mysql", "NAME": mysql_place.mysql_db,
                      "USER": MARIADB["user"], "HOST": MARIADB["host"],
                      "PORT": str(MARIADB["port"])}})
    from django.db import connections, transaction

    hailq.inbox(connections["my"].connection or _connected(connections["my"]), "billing")
    hailq.inbox(connections["my"].connection, "audit")  # MariaDB: made outside a transaction
    for alias, place, read in (("default", sqlite_place, sqlite_effects),
                               ("pg", pg_place, pg_effects), ("my", mysql_place, mysql_effects)):
        with pytest.raises(hailq.InvalidArgument, match=r"transaction\.atomic"):
            hailq.inbox(connections[alias], "billing")

        @contextlib.contextmanager
        def atomic(alias: str = alias) -> Iterator[Any]:
            with transaction.atomic(using=alias):
                yield connections[alias]

        scenario(atomic, read(place))
        connections[alias].close()


def _connected(wrapper: Any) -> Any:
    wrapper.ensure_connection()
    return wrapper.connection


def test_rule_38_anything_else_is_refused_naming_what_is_accepted() -> None:
    with pytest.raises(hailq.InvalidArgument, match="SQLAlchemy Connection, Session"):
        hailq.inbox(object(), "billing")


# -- asyncio stacks --------------------------------------------------------------------------

async def _run_format(conn: Any, sql: str, params: tuple[Any, ...]) -> None:
    cur = conn.cursor()
    await cur.execute(sql.format("%s"), params)
    await cur.close()


def test_rule_38_psycopg_async(pg_place: Place) -> None:
    import psycopg

    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(pg_place.pg_dsn) as conn:
            @contextlib.asynccontextmanager
            async def transaction() -> AsyncIterator[Any]:
                async with conn.transaction():
                    yield conn

            await scenario_async(transaction, pg_effects(pg_place), _run_format)

    asyncio.run(main())


def test_rule_38_asyncpg(pg_place: Place) -> None:
    import asyncpg

    async def run(conn: Any, sql: str, params: tuple[Any, ...]) -> None:
        await conn.execute(sql.format("$1"), *params)

    async def main() -> None:
        conn = await asyncpg.connect(
            PG_DSN_ASYNCPG(pg_place), server_settings={"search_path": pg_place.pg_schema})

        @contextlib.asynccontextmanager
        async def transaction() -> AsyncIterator[Any]:
            async with conn.transaction():
                yield conn

        await scenario_async(transaction, pg_effects(pg_place), run)
        await conn.close()

    asyncio.run(main())


def PG_DSN_ASYNCPG(place: Place) -> str:
    return place.pg_dsn.split("?")[0]


SA_ASYNC_URLS = {"sqlite": lambda p: f"sqlite+aiosqlite:///{p.sqlite}",
                 "asyncpg": lambda p: f"postgresql+asyncpg://{PG_DSN_ASYNCPG(p).split('://')[1]}",
                 "psycopg_async": lambda p: f"postgresql+psycopg://{p.pg_dsn.split('://')[1]}",
                 "aiomysql": lambda p: f"mysql+aiomysql://root@127.0.0.1:3306/{p.mysql_db}"}


@pytest.mark.parametrize("kind", ["AsyncConnection", "AsyncSession"])
@pytest.mark.parametrize("db", sorted(SA_ASYNC_URLS))
def test_rule_38_sqlalchemy_async(db: str, kind: str, request: pytest.FixtureRequest) -> None:
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    place: Place = request.getfixturevalue(PLACE_OF[db])
    args = ({"server_settings": {"search_path": place.pg_schema}} if db == "asyncpg" else {})
    engine = create_async_engine(SA_ASYNC_URLS[db](place), connect_args=args)
    if db == "aiomysql":  # made once outside a transaction, as the inbox asks there
        conn = _mysql(place)
        hailq.inbox(conn, "billing")
        hailq.inbox(conn, "audit")
        conn.close()

    async def run(conn: Any, sql: str, params: tuple[Any, ...]) -> None:
        target = await conn.connection() if isinstance(conn, AsyncSession) else conn
        mark = {"qmark": "?", "numeric_dollar": "$1"}.get(engine.dialect.paramstyle, "%s")
        await target.exec_driver_sql(sql.format(mark), params)

    async def main() -> None:
        @contextlib.asynccontextmanager
        async def transaction() -> AsyncIterator[Any]:
            if kind == "AsyncConnection":
                async with engine.begin() as conn:
                    yield conn
            else:
                async with AsyncSession(engine) as session, session.begin():
                    yield session

        await scenario_async(transaction, EFFECTS_OF[PLACE_OF[db]](place), run)
        await engine.dispose()

    asyncio.run(main())
