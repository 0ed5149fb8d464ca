"""The connections users hold (SPEC rule 38), made into one shape for hailq's steps.

A step is written once as a generator that yields ``Statement``s (SQL with ``?``
marks) and receives each one's ``Result``; ``drive`` runs it on a blocking
connection and ``drive_async`` awaits it on an asyncio one, so nothing is written
twice for sync and async code (psycopg's own protocol is built the same way).

Accepted, each through the caller's own transaction:

- ``sqlite3.Connection``;
- psycopg 3 ``Connection`` and ``AsyncConnection``; psycopg2 connections; asyncpg
  connections;
- SQLAlchemy 2 ``Connection``, ``Session``, ``AsyncConnection``, ``AsyncSession`` on
  any of those drivers, aiosqlite and PyMySQL (statements go through SQLAlchemy's own
  connection, ``exec_driver_sql``, so they join the transaction SQLAlchemy began:
  on its asyncpg driver a statement sent to the raw driver connection would commit
  on its own);
- Django's connection inside ``transaction.atomic()``;
- PyMySQL and mysqlclient connections (MySQL, MariaDB).

The inbox (``hailq/inbox.py``) and sends in the caller's transaction
(``hailq/joined.py``, ``connection=`` of ``send``, ``send_many`` and ``publish``)
run their steps here. Anything else raises ``InvalidArgument`` naming these. The
optional libraries are never imported here: a connection is known by its type's module.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar, cast

from hailq.errors import InvalidArgument

if TYPE_CHECKING:
    import psycopg
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

    # The asyncio connections whose sends are awaited (asyncpg's too, typed Any).
    AsyncCaller: TypeAlias = psycopg.AsyncConnection[Any] | AsyncConnection | AsyncSession

T = TypeVar("T")
Flavor = Literal["sqlite", "postgres", "mysql"]
Style = Literal["qmark", "format", "dollar"]

ACCEPTED = ("sqlite3.Connection, psycopg Connection or AsyncConnection, a psycopg2 or "
            "asyncpg connection, a SQLAlchemy Connection, Session, AsyncConnection or "
            "AsyncSession, Django's connection inside transaction.atomic(), or a PyMySQL "
            "or mysqlclient connection")


@dataclass(frozen=True)
class Statement:
    """SQL with ``?`` marks and its positional parameters; ``rows``: fetch them."""

    sql: str
    params: tuple[Any, ...] = ()
    rows: bool = False


@dataclass(frozen=True)
class Result:
    rowcount: int
    rows: list[tuple[Any, ...]]


Step = Generator[Statement, Result, T]


@dataclass(frozen=True)
class Caller:
    """A caller's connection as hailq runs statements on it."""

    target: Any  # what statements run on: the connection, or SQLAlchemy's connection
    flavor: Flavor
    style: Style
    how: str  # which runner below
    is_async: bool


def caller(connection: Any) -> Caller:
    """Recognise ``connection``, or raise ``InvalidArgument`` naming what is accepted."""
    if isinstance(connection, sqlite3.Connection):
        return Caller(connection, "sqlite", "qmark", "execute", False)
    module, name = type(connection).__module__, type(connection).__name__
    top = module.split(".", 1)[0]
    if top == "psycopg" and name in ("Connection", "AsyncConnection"):
        return Caller(connection, "postgres", "format", "psycopg", name == "AsyncConnection")
    if top == "psycopg2":
        return Caller(connection, "postgres", "format", "cursor", False)
    if top == "asyncpg":
        return Caller(connection, "postgres", "dollar", "asyncpg", True)
    if top in ("pymysql", "MySQLdb"):
        return Caller(connection, "mysql", "format", "cursor", False)
    if top == "sqlalchemy":
        return _sqlalchemy(connection, name)
    if top == "django":
        return _django(connection)
    raise InvalidArgument(f"hailq needs {ACCEPTED}; got {module}.{name}")


def _flavor(name: str) -> Flavor:
    if name.startswith("postgres"):
        return "postgres"
    if name in ("mysql", "mariadb"):
        return "mysql"
    if name == "sqlite":
        return "sqlite"
    raise InvalidArgument(f"hailq runs on SQLite, PostgreSQL and MySQL/MariaDB, not {name}")


def _sqlalchemy(connection: Any, name: str) -> Caller:
    if name not in ("Connection", "Session", "AsyncConnection", "AsyncSession"):
        raise InvalidArgument(f"hailq needs {ACCEPTED}; got SQLAlchemy's {name}")
    is_async = name.startswith("Async")
    bind = connection.get_bind() if name.endswith("Session") else connection
    dialect = bind.dialect
    style: Style = {"qmark": "qmark", "numeric_dollar": "dollar"}.get(
        dialect.paramstyle, "format")  # type: ignore[assignment]
    return Caller(connection, _flavor(dialect.name), style,
                  "session" if name.endswith("Session") else "sqlalchemy", is_async)


def _django(connection: Any) -> Caller:
    if not hasattr(connection, "in_atomic_block") or not hasattr(connection, "vendor"):
        raise InvalidArgument(f"hailq needs {ACCEPTED}; got {type(connection).__name__}")
    if not connection.in_atomic_block:
        raise InvalidArgument("Django's connection must be used inside "
                              "transaction.atomic(): outside it each statement commits "
                              "on its own")
    return Caller(connection, _flavor(connection.vendor), "format", "django", False)


_MARK = re.compile(r"\?")


@functools.lru_cache(maxsize=256)
def render(sql: str, style: Style) -> str:
    """``?`` marks in the caller's parameter style, once per statement and style
    (hailq's SQL has no other ``?``; a ``%`` of its own is doubled where ``%s`` marks)."""
    if style == "qmark":
        return sql
    if style == "format":
        return sql.replace("%", "%%").replace("?", "%s")
    count = iter(range(1, 1000))
    return _MARK.sub(lambda _: f"${next(count)}", sql)


def drive(c: Caller, step: Step[T]) -> T:
    """Run ``step`` on a blocking connection."""
    if c.is_async:
        raise InvalidArgument("this connection is asyncio's: await the call instead")
    statement, value = _advance(step, None)
    while statement is not None:
        statement, value = _advance(step, _run(c, statement))
    return cast(T, value)


async def drive_async(c: Caller, step: Step[T]) -> T:
    """Run ``step`` on an asyncio connection."""
    if not c.is_async:
        raise InvalidArgument("this connection blocks: call without await")
    statement, value = _advance(step, None)
    while statement is not None:
        statement, value = _advance(step, await _run_async(c, statement))
    return cast(T, value)


def _advance(step: Step[T], sent: Result | None) -> tuple[Statement | None, Any]:
    """The step's next statement, or None and what the step returned."""
    try:
        return (step.send(sent) if sent is not None else next(step)), None
    except StopIteration as done:
        return None, done.value


def _run(c: Caller, s: Statement) -> Result:
    sql = render(s.sql, c.style)
    if c.how == "execute":  # sqlite3
        cur = c.target.execute(sql, s.params)
        return Result(cur.rowcount, cur.fetchall() if s.rows else [])
    if c.how in ("sqlalchemy", "session"):
        target = c.target.connection() if c.how == "session" else c.target
        out = target.exec_driver_sql(sql, s.params)
        return Result(out.rowcount, [tuple(r) for r in out.fetchall()] if s.rows else [])
    cursor = c.target.cursor()  # psycopg, psycopg2, PyMySQL, mysqlclient, Django
    try:
        if c.how == "psycopg":  # never prepared: the caller's connection may be pooled
            cursor.execute(sql, s.params, prepare=False)
        else:
            cursor.execute(sql, s.params)
        return Result(cursor.rowcount, [tuple(r) for r in cursor.fetchall()] if s.rows else [])
    finally:
        cursor.close()


async def _run_async(c: Caller, s: Statement) -> Result:
    sql = render(s.sql, c.style)
    if c.how == "asyncpg":
        if s.rows:
            found = await c.target.fetch(sql, *s.params)
            return Result(len(found), [tuple(r) for r in found])
        status = await c.target.execute(sql, *s.params)  # e.g. "INSERT 0 1"
        tail = status.rsplit(" ", 1)[-1]
        return Result(int(tail) if tail.isdigit() else -1, [])
    if c.how in ("sqlalchemy", "session"):
        target = await c.target.connection() if c.how == "session" else c.target
        out = await target.exec_driver_sql(sql, s.params)
        return Result(out.rowcount, [tuple(r) for r in out.fetchall()] if s.rows else [])
    cursor = c.target.cursor()  # psycopg's AsyncConnection
    try:
        await cursor.execute(sql, s.params, prepare=False)
        rows = [tuple(r) for r in await cursor.fetchall()] if s.rows else []
        return Result(cursor.rowcount, rows)
    finally:
        await cursor.close()
