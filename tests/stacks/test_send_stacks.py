"""Sends in the user's own transaction, in every stack users hold (SPEC rules 3, 38),
against the real servers: committed work sends its messages once (a dedup id still
dedups), rolled back work sends nothing, and a connection to any other database is
refused with InvalidArgument before anything is written.

One scenario, written once for blocking stacks and once awaited: each stack gives a
``transaction()`` yielding what the application hands to ``connection=``, and ``run``
writes the application's own row the way that stack writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

import hailq
import hailq.aio
from conftest import PG_URL, drop_schema, require_postgres

Sync = Callable[[], AbstractContextManager[Any]]
Async = Callable[[], AbstractAsyncContextManager[Any]]
PG_HOSTLESS = PG_URL.split("?")[0]


class Boom(Exception):
    """The application's failure after it sent."""


@contextlib.contextmanager
def hailq_and_app(backend: str, tmp_path: Path) -> Iterator[tuple[hailq.Broker, str, str]]:
    """A broker, where the application's connection goes (a URL of its driver's kind:
    a file path, or a libpq URL whose search_path is the application's schema), and
    the SQL of the application's table, created there."""
    if backend == "sqlite":
        path = tmp_path / "app.db"
        broker = hailq.connect(f"sqlite:///{path}")
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute("CREATE TABLE claims (id TEXT NOT NULL)")
            conn.commit()
        yield broker, str(path), "?"
        broker.close()
        return
    require_postgres()
    import psycopg

    tag = uuid.uuid4().hex[:12]
    broker = hailq.connect(f"{PG_URL}{'&' if '?' in PG_URL else '?'}schema=hailq_s_{tag}")
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA app_{tag}")
        conn.execute(f"CREATE TABLE app_{tag}.claims (id TEXT NOT NULL)")
    try:
        yield broker, f"{PG_HOSTLESS}?options=-c%20search_path%3Dapp_{tag}", "%s"
    finally:
        broker.close()
        drop_schema(f"hailq_s_{tag}")
        drop_schema(f"app_{tag}")


def _declare(broker: hailq.Broker) -> tuple[hailq.Queue, hailq.Topic, hailq.Queue]:
    q = broker.queue("claims")
    topic = broker.topic("claim-events")
    return q, topic, topic.subscribe("audit")


def _received(q: hailq.Queue) -> list[Any]:
    got = q.receive(max_messages=10)
    q.ack_many(got)
    return [m.body for m in got]


def scenario(broker: hailq.Broker, transaction: Sync,
             run: Callable[[Any, str, tuple[Any, ...]], None], mark: str) -> None:
    q, topic, audit = _declare(broker)
    insert = f"INSERT INTO claims (id) VALUES ({mark})"
    with transaction() as conn:
        run(conn, insert, ("c-1",))
        first = q.send({"claim": 1}, connection=conn)
        batch = q.send_many(["a", hailq.Envelope("b", ordering_key="k")], connection=conn)
        copies = topic.publish("published", connection=conn)
        deduped = q.send("d", dedup_id="d-1", connection=conn)
        assert q.peek() == []  # nothing before the caller commits
    assert copies == {"audit": copies["audit"]}
    with transaction() as conn:
        assert q.send("d again", dedup_id="d-1", connection=conn) == deduped
    got = q.receive(max_messages=10)
    assert [m.body for m in got] == [{"claim": 1}, "a", "b", "d"]
    assert [m.id for m in got] == [first, *batch, deduped]
    q.ack_many(got)
    assert _received(audit) == ["published"]
    with pytest.raises(Boom), transaction() as conn:
        run(conn, insert, ("c-2",))
        q.send("rolled back", connection=conn)
        q.send_many(["x", "y"], connection=conn)
        topic.publish("rolled back", connection=conn)
        raise Boom
    assert _received(q) == [] and _received(audit) == []
    assert q.stats().sent == 4 and audit.stats().sent == 1


async def _now(value: Any) -> Any:
    """A sync API's answer as it is; an awaitable one (hailq.aio's) awaited."""
    return await value if inspect.isawaitable(value) else value


async def scenario_async(broker: hailq.Broker, transaction: Async,
                         run: Callable[[Any, str, tuple[Any, ...]], Any], mark: str,
                         api: str = "sync") -> None:
    """The scenario awaited, through the sync API (whose sends on an asyncio connection
    are awaitables) or through ``hailq.aio`` (``api="aio"``), on the same database."""
    q, topic, audit = _declare(broker)
    aio = await hailq.aio.beside(broker) if api == "aio" else None
    face: Any = q if aio is None else await aio.queue("claims")
    hub: Any = topic if aio is None else await aio.topic("claim-events")
    insert = f"INSERT INTO claims (id) VALUES ({mark})"
    async with transaction() as conn:
        await run(conn, insert, ("c-1",))
        first = await face.send({"claim": 1}, connection=conn)
        batch = await face.send_many(["a", hailq.Envelope("b", ordering_key="k")],
                                     connection=conn)
        copies = await hub.publish("published", connection=conn)
        deduped = await face.send("d", dedup_id="d-1", connection=conn)
        later = await face.send("later", connection=conn,
                                not_before=time.time() + 3600)  # reads hailq's clock
        with pytest.raises(hailq.InvalidArgument):  # the sync API: at the call
            await _now(face.send("bad", priority=99, connection=conn))
        assert await _now(face.peek()) == []
    assert list(copies) == ["audit"] and isinstance(later, str)
    async with transaction() as conn:
        assert await face.send("d again", dedup_id="d-1", connection=conn) == deduped
    got = q.receive(max_messages=10)
    assert [m.body for m in got] == [{"claim": 1}, "a", "b", "d"]
    assert [m.id for m in got] == [first, *batch, deduped]
    q.ack_many(got)
    assert _received(audit) == ["published"]
    with pytest.raises(Boom):
        async with transaction() as conn:
            await run(conn, insert, ("c-2",))
            await face.send("rolled back", connection=conn)
            await face.send_many(["x", "y"], connection=conn)
            await hub.publish("rolled back", connection=conn)
            raise Boom
    assert _received(q) == [] and _received(audit) == []
    assert q.stats().sent == 5 and audit.stats().sent == 1
    if aio is not None:
        await aio.close()


def _execute(conn: Any, sql: str, params: tuple[Any, ...]) -> None:
    if hasattr(conn, "exec_driver_sql"):
        conn.exec_driver_sql(sql, params)
    elif hasattr(conn, "get_bind"):  # a Session
        conn.connection().exec_driver_sql(sql, params)
    else:
        cur = conn.cursor()
        cur.execute(sql, params)
        cur.close()


# -- blocking stacks -------------------------------------------------------------------------

def test_rule_38_send_sqlite3(tmp_path: Path) -> None:
    with hailq_and_app("sqlite", tmp_path) as (broker, where, mark):
        conn = sqlite3.connect(where)

        @contextlib.contextmanager
        def transaction() -> Iterator[sqlite3.Connection]:
            with conn:
                yield conn

        scenario(broker, transaction, _execute, mark)
        conn.close()


def test_rule_38_send_psycopg(tmp_path: Path) -> None:
    import psycopg

    with hailq_and_app("postgres", tmp_path) as (broker, where, mark), \
            psycopg.connect(where) as conn:
        @contextlib.contextmanager
        def transaction() -> Iterator[Any]:
            with conn.transaction():
                yield conn

        scenario(broker, transaction, _execute, mark)


def test_rule_38_send_psycopg2(tmp_path: Path) -> None:
    import psycopg2

    with hailq_and_app("postgres", tmp_path) as (broker, where, mark):
        conn = psycopg2.connect(where)

        @contextlib.contextmanager
        def transaction() -> Iterator[Any]:
            with conn:
                yield conn

        scenario(broker, transaction, _execute, mark)
        conn.close()


SA_SYNC = {"sqlite": "sqlite:///{}", "psycopg": "postgresql+psycopg://{}",
           "psycopg2": "postgresql+psycopg2://{}"}


def _sa_url(template: str, where: str) -> str:
    return template.format(where.split("://", 1)[-1] if "://" in where else where)


@pytest.mark.parametrize("kind", ["Connection", "Session"])
@pytest.mark.parametrize("driver", sorted(SA_SYNC))
def test_rule_38_send_sqlalchemy(driver: str, kind: str, tmp_path: Path) -> None:
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    with hailq_and_app("sqlite" if driver == "sqlite" else "postgres", tmp_path) as (
            broker, where, mark):
        engine = create_engine(_sa_url(SA_SYNC[driver], where))

        @contextlib.contextmanager
        def transaction() -> Iterator[Any]:
            if kind == "Connection":
                with engine.begin() as conn:
                    yield conn
            else:
                with Session(engine) as session, session.begin():
                    yield session

        scenario(broker, transaction, _execute, mark)
        engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_rule_38_send_django(backend: str, tmp_path: Path) -> None:
    from stacks.django_setup import configure

    with hailq_and_app(backend, tmp_path) as (broker, where, _):
        alias = f"send_{backend}"
        if backend == "sqlite":
            config = {"ENGINE": "django.db.backends.sqlite3", "NAME": where}
        else:
            config = {"ENGINE": "django.db.backends.postgresql", "NAME": "test",
                      "USER": "postgres", "HOST": "127.0.0.1", "PORT": "5432",
                      "OPTIONS": {"options": "-c search_path=" + where.rsplit("%3D", 1)[1]}}
        configure({alias: config})
        from django.db import connections, transaction

        with pytest.raises(hailq.InvalidArgument, match=r"transaction\.atomic"):
            broker.queue("claims").send("outside", connection=connections[alias])

        @contextlib.contextmanager
        def atomic() -> Iterator[Any]:
            with transaction.atomic(using=alias):
                yield connections[alias]

        scenario(broker, atomic, _execute, "%s")
        connections[alias].close()


# -- asyncio stacks --------------------------------------------------------------------------

async def _run_format(conn: Any, sql: str, params: tuple[Any, ...]) -> None:
    cur = conn.cursor()
    await cur.execute(sql, params)
    await cur.close()


@pytest.mark.parametrize("api", ["sync", "aio"])
def test_rule_38_send_psycopg_async(api: str, tmp_path: Path) -> None:
    import psycopg

    async def main(broker: hailq.Broker, where: str, mark: str) -> None:
        async with await psycopg.AsyncConnection.connect(where) as conn:
            @contextlib.asynccontextmanager
            async def transaction() -> AsyncIterator[Any]:
                async with conn.transaction():
                    yield conn

            await scenario_async(broker, transaction, _run_format, mark, api)

    with hailq_and_app("postgres", tmp_path) as args:
        asyncio.run(main(*args))


def _asyncpg_args(where: str) -> tuple[str, dict[str, Any]]:
    return where.split("?")[0], {"search_path": where.rsplit("%3D", 1)[1]}


@pytest.mark.parametrize("api", ["sync", "aio"])
def test_rule_38_send_asyncpg(api: str, tmp_path: Path) -> None:
    import asyncpg

    async def run(conn: Any, sql: str, params: tuple[Any, ...]) -> None:
        await conn.execute(sql.replace("%s", "$1"), *params)

    async def main(broker: hailq.Broker, where: str, mark: str) -> None:
        dsn, settings = _asyncpg_args(where)
        conn = await asyncpg.connect(dsn, server_settings=settings)

        @contextlib.asynccontextmanager
        async def transaction() -> AsyncIterator[Any]:
            async with conn.transaction():
                yield conn

        await scenario_async(broker, transaction, run, mark, api)
        with pytest.raises(hailq.InvalidArgument, match="autocommit"):
            await broker.queue("claims").send("no transaction", connection=conn)
        await conn.close()

    with hailq_and_app("postgres", tmp_path) as args:
        asyncio.run(main(*args))


SA_ASYNC = {"aiosqlite": "sqlite+aiosqlite:///{}", "asyncpg": "postgresql+asyncpg://{}",
            "psycopg_async": "postgresql+psycopg://{}"}


@pytest.mark.parametrize("api", ["sync", "aio"])
@pytest.mark.parametrize("kind", ["AsyncConnection", "AsyncSession"])
@pytest.mark.parametrize("driver", sorted(SA_ASYNC))
def test_rule_38_send_sqlalchemy_async(driver: str, kind: str, api: str,
                                       tmp_path: Path) -> None:
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    async def main(broker: hailq.Broker, where: str, mark: str) -> None:
        args: dict[str, Any] = {}
        if driver == "asyncpg":
            where, settings = _asyncpg_args(where)
            args = {"server_settings": settings}
        engine = create_async_engine(_sa_url(SA_ASYNC[driver], where), connect_args=args)

        async def run(conn: Any, sql: str, params: tuple[Any, ...]) -> None:
            target = await conn.connection() if isinstance(conn, AsyncSession) else conn
            if engine.dialect.paramstyle == "numeric_dollar":
                sql = sql.replace("%s", "$1")
            await target.exec_driver_sql(sql, params)

        @contextlib.asynccontextmanager
        async def transaction() -> AsyncIterator[Any]:
            if kind == "AsyncConnection":
                async with engine.begin() as conn:
                    yield conn
            else:
                async with AsyncSession(engine) as session, session.begin():
                    yield session

        await scenario_async(broker, transaction, run, mark, api)
        await engine.dispose()

    with hailq_and_app("sqlite" if driver == "aiosqlite" else "postgres", tmp_path) as args:
        asyncio.run(main(*args))


# -- the wrong database -------------------------------------------------------------------------

def test_rule_38_send_refuses_another_sqlite_file(tmp_path: Path) -> None:
    with hailq_and_app("sqlite", tmp_path) as (broker, _, _mark):
        other = hailq.connect(f"sqlite:///{tmp_path / 'other.db'}")
        other.queue("claims")
        q, topic = broker.queue("claims"), broker.topic("t")
        for path in (tmp_path / "other.db", tmp_path / "plain.db"):  # hailq's, and not
            conn = sqlite3.connect(path)
            conn.execute("CREATE TABLE IF NOT EXISTS claims (id TEXT)")
            conn.execute("INSERT INTO claims VALUES ('c-1')")
            with pytest.raises(hailq.InvalidArgument, match="another database"):
                q.send("lost", connection=conn)
            with pytest.raises(hailq.InvalidArgument, match="another database"):
                topic.publish("lost", connection=conn)
            conn.commit()
            conn.close()
        assert other.queue("claims").stats().sent == 0 and q.stats().sent == 0
        other.close()


def test_rule_38_send_refuses_another_postgres_database(tmp_path: Path) -> None:
    import psycopg

    with hailq_and_app("postgres", tmp_path) as (broker, _, _mark):
        schema = broker.backend.dialect.schema  # type: ignore[attr-defined]
        other_db = f"hailq_other_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {other_db}")
        base = PG_HOSTLESS.rsplit("/", 1)[0]
        try:
            # The same schema name, hailq's too, in another database: another instance.
            other = hailq.connect(f"{base}/{other_db}?schema={schema}")
            other.queue("claims")
            q = broker.queue("claims")
            for db in (other_db, "postgres"):
                with psycopg.connect(f"{base}/{db}") as conn:
                    with pytest.raises(hailq.InvalidArgument, match="another database"):
                        q.send("lost", connection=conn)
                    conn.execute("SELECT 1")  # the caller's transaction still works
            assert other.queue("claims").stats().sent == 0 and q.stats().sent == 0
            other.close()
        finally:
            with psycopg.connect(PG_URL, autocommit=True) as admin:
                admin.execute(f"DROP DATABASE {other_db} WITH (FORCE)")


def test_rule_38_send_refuses_an_autocommitting_connection_and_other_kinds(
        tmp_path: Path) -> None:
    with hailq_and_app("sqlite", tmp_path) as (broker, where, _):
        q = broker.queue("claims")
        conn = sqlite3.connect(where, isolation_level=None)
        with pytest.raises(hailq.InvalidArgument, match="autocommit"):
            q.send("alone", connection=conn)
        conn.close()
        with pytest.raises(hailq.InvalidArgument, match="SQLAlchemy Connection, Session"):
            q.send("what", connection=object())
        assert q.stats().sent == 0


def test_rule_38_an_awaited_send_runs_the_send_hooks(tmp_path: Path) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    seen: list[Any] = []

    class Stamp(hailq.Hook):
        def before_send(self, destination: str, headers: dict[str, str]) -> None:
            headers["stamped"] = destination

        def after_send(self, destination: str, ids: list[str]) -> None:
            seen.append((destination, len(ids)))

    with hailq_and_app("sqlite", tmp_path) as (broker, where, _):
        broker.add_hook(Stamp())
        q, topic, audit = _declare(broker)
        engine = create_async_engine(f"sqlite+aiosqlite:///{where}")

        async def main() -> None:
            async with engine.begin() as conn:
                await q.send("one", connection=conn)
                await q.send_many(["two", "three"], connection=conn)
                await topic.publish("event", connection=conn)
            await engine.dispose()

        asyncio.run(main())
        assert seen == [("claims", 1), ("claims", 2), ("claim-events", 1)]
        got = q.receive(max_messages=10) + audit.receive()
        assert [(m.body, m.headers["stamped"]) for m in got] == [
            ("one", "claims"), ("two", "claims"), ("three", "claims"),
            ("event", "claim-events")]


# -- every stack refuses another database ------------------------------------------------------

@contextlib.contextmanager
def another_hailq(backend: str, broker: hailq.Broker, tmp_path: Path) -> Iterator[str]:
    """Another hailq database the application's driver can reach: a SQLite file, or the
    broker's own schema name in the server's ``postgres`` database (so only the
    instance id tells them apart)."""
    if backend == "sqlite":
        hailq.connect(f"sqlite:///{tmp_path / 'other.db'}").close()
        yield str(tmp_path / "other.db")
        return
    schema = broker.backend.dialect.schema  # type: ignore[attr-defined]
    base = PG_HOSTLESS.rsplit("/", 1)[0]
    hailq.connect(f"{base}/postgres?schema={schema}").close()
    try:
        yield f"{base}/postgres?options=-c%20search_path%3D{schema}"
    finally:
        import psycopg

        with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


@contextlib.contextmanager
def blocking(stack: str, where: str) -> Iterator[Any]:
    """A connection of ``stack`` to ``where``, in a transaction committed at the end."""
    driver = stack.split("-")[-1]
    if stack == "sqlite3":
        conn = sqlite3.connect(where)
        with conn:
            yield conn
        conn.close()
    elif stack == "psycopg":
        import psycopg

        with psycopg.connect(where) as conn, conn.transaction():
            yield conn
    elif stack == "psycopg2":
        import psycopg2

        conn = psycopg2.connect(where)
        with conn:
            yield conn
        conn.close()
    elif stack.startswith("django"):
        from stacks.django_setup import configure

        alias = f"elsewhere_{uuid.uuid4().hex[:8]}"
        configure({alias: {"ENGINE": "django.db.backends.sqlite3", "NAME": where}
                   if driver == "sqlite" else {
                       "ENGINE": "django.db.backends.postgresql", "NAME": "postgres",
                       "USER": "postgres", "HOST": "127.0.0.1", "PORT": "5432"}})
        from django.db import connections, transaction

        with transaction.atomic(using=alias):
            yield connections[alias]
        connections[alias].close()
    else:  # sqlalchemy-<driver>, Connection and Session alike
        from sqlalchemy import create_engine
        from sqlalchemy.orm import Session

        engine = create_engine(_sa_url(SA_SYNC[driver], where))
        with Session(engine) as session, session.begin():
            yield session
        engine.dispose()


BLOCKING = {"sqlite3": "sqlite", "psycopg": "postgres", "psycopg2": "postgres",
            "django-sqlite": "sqlite", "django-postgres": "postgres",
            "sqlalchemy-sqlite": "sqlite", "sqlalchemy-psycopg": "postgres",
            "sqlalchemy-psycopg2": "postgres"}


@pytest.mark.parametrize("stack", sorted(BLOCKING))
def test_rule_38_every_blocking_stack_refuses_another_database(stack: str,
                                                               tmp_path: Path) -> None:
    backend = BLOCKING[stack]
    with hailq_and_app(backend, tmp_path) as (broker, _, _mark), \
            another_hailq(backend, broker, tmp_path) as elsewhere:
        q, topic, audit = _declare(broker)
        with blocking(stack, elsewhere) as conn:
            for attempt in (lambda: q.send("x", connection=conn),
                            lambda: q.send_many(["x", "y"], connection=conn),
                            lambda: topic.publish("x", connection=conn)):
                with pytest.raises(hailq.InvalidArgument, match="another database"):
                    attempt()
        assert q.stats().sent == audit.stats().sent == 0


AWAITED = {"psycopg_async": "postgres", "asyncpg": "postgres",
           "sqlalchemy-aiosqlite": "sqlite", "sqlalchemy-asyncpg": "postgres",
           "sqlalchemy-psycopg_async": "postgres"}


@pytest.mark.parametrize("stack", sorted(AWAITED))
def test_rule_38_every_asyncio_stack_refuses_another_database(stack: str,
                                                              tmp_path: Path) -> None:
    backend = AWAITED[stack]

    @contextlib.asynccontextmanager
    async def awaited(where: str) -> AsyncIterator[Any]:
        if stack == "psycopg_async":
            import psycopg

            async with await psycopg.AsyncConnection.connect(where) as conn, \
                    conn.transaction():
                yield conn
        elif stack == "asyncpg":
            import asyncpg

            dsn, settings = _asyncpg_args(where)
            conn = await asyncpg.connect(dsn, server_settings=settings)
            async with conn.transaction():
                yield conn
            await conn.close()
        else:
            from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

            driver, args = stack.split("-")[1], {}
            if driver == "asyncpg":
                where, settings = _asyncpg_args(where)
                args = {"server_settings": settings}
            engine = create_async_engine(_sa_url(SA_ASYNC[driver], where), connect_args=args)
            async with AsyncSession(engine) as session, session.begin():
                yield session
            await engine.dispose()

    with hailq_and_app(backend, tmp_path) as (broker, _, _mark), \
            another_hailq(backend, broker, tmp_path) as elsewhere:
        q, topic, audit = _declare(broker)

        async def main() -> None:
            async with awaited(elsewhere) as conn:
                for attempt in (lambda: q.send("x", connection=conn),
                                lambda: q.send_many(["x", "y"], connection=conn),
                                lambda: topic.publish("x", connection=conn)):
                    with pytest.raises(hailq.InvalidArgument, match="another database"):
                        await attempt()

        asyncio.run(main())
        assert q.stats().sent == audit.stats().sent == 0
