"""SQLite connections across threads and forks, hailq's write transaction, and the
file's outages as the log tells them."""

from __future__ import annotations

import functools
import json
import logging
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, ClassVar

from hailq.backends.base import NewMessage
from hailq.backends.sqlite.watch import FolderWatch
from hailq.errors import SchemaError, StorageError
from hailq.outage import GaveWay, Outage
from hailq.policy.ordering import sort_key
from hailq.policy.retry import stored_backoff

if TYPE_CHECKING:
    from hailq.backends.sqlite.backend import SQLiteDialect


class Forks:
    """How many forks this process is from its start: a connection or lock made in
    another generation belongs to the parent. Counting at fork replaces a getpid
    system call on every transaction."""

    generation = 0

    @classmethod
    def count(cls) -> None:
        cls.generation += 1


os.register_at_fork(after_in_child=Forks.count)

_BUSY = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED
# A file that stays locked past busy_timeout, is read-only, fails to read or write, cannot
# be opened or is full: the database is away for hailq's writes, an outage to report.
_UNAVAILABLE = {*_BUSY, 8, 10, 13, 14}  # READONLY, IOERR, FULL, CANTOPEN


def busy(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says another connection holds the lock (try again later)."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF in _BUSY


def outage_of(path: str) -> Outage:
    """The outage report of the database file at ``path``."""
    return Outage(f"SQLite database {path}", logging.getLogger("hailq.sqlite"),
                  lost="unavailable", back="available again")


def unavailable(backend: SQLiteDialect, error: StorageError, code: int) -> StorageError:
    """``error``, told to the outage report first if ``code`` (SQLite's primary result
    code) says the file is away. Only a committed write ends the outage (in ``end``):
    a read-only file still answers reads."""
    if code in _UNAVAILABLE:
        error.during_outage = backend._outage.failed(
            str(error).removeprefix(f"SQLite database {backend.path}: "))
    return error


class Local(threading.local):
    generation: int = -1
    patience: float | None = None  # briefly(): how long a busy database is waited for
    conn: sqlite3.Connection | None = None
    synchronous: str = ""
    version: int | None = None
    watch: FolderWatch | None = None
    watch_failed: bool = False


class ForkSafeLock:
    """A re-entrant lock that a forked child gets fresh (a parent thread may have held it).
    ``acquire`` and ``release`` are the lock's own methods, with no Python frame of
    their own: every receive and every ack takes this lock."""

    __slots__ = ("__weakref__", "acquire", "release")
    _every: ClassVar[weakref.WeakSet[ForkSafeLock]] = weakref.WeakSet()

    def __init__(self) -> None:
        self._renew()
        ForkSafeLock._every.add(self)

    def _renew(self) -> None:
        lock = threading.RLock()
        self.acquire: Callable[..., bool] = lock.acquire
        self.release: Callable[[], None] = lock.release

    @classmethod
    def after_fork(cls) -> None:
        for lock in list(cls._every):
            lock._renew()

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


os.register_at_fork(after_in_child=ForkSafeLock.after_fork)


def begin(backend: SQLiteDialect, durable: bool) -> sqlite3.Connection:
    """Start one write transaction of ``backend`` on this thread's connection. Functions,
    not a context manager's methods: every receive and every ack runs one, and each
    Python frame saved there is a visible share of a one-message cycle."""
    local = backend._local
    conn = local.conn
    if conn is None or local.generation != Forks.generation:
        conn = backend._connection()
    wanted = backend._send_sync if durable else "NORMAL"
    # Threads of one process take turns on a lock first: handing over a Python lock is
    # immediate, while waiting on SQLite's file lock means sleeping and retrying.
    if local.patience is None:
        backend._writer.acquire()
    elif not backend._writer.acquire(timeout=local.patience):
        raise GaveWay(f"SQLite database {backend.path}: busy (a background write gave way)")
    try:
        if local.synchronous != wanted:
            conn.execute(f"PRAGMA synchronous={wanted}")
            local.synchronous = wanted
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if not busy(exc):
                raise
            backend._begin(conn)  # another process writes: wait for it
    except BaseException as exc:
        backend._writer.release()
        if isinstance(exc, sqlite3.Error):
            raise backend._storage_error(exc) from None
        raise
    return conn


def end(backend: SQLiteDialect, conn: sqlite3.Connection, exc: BaseException | None) -> None:
    """Commit the transaction ``begin`` started, or roll it back after ``exc``: a
    database error then becomes a StorageError, any other the caller re-raises."""
    try:
        if exc is None:
            try:
                conn.execute("COMMIT")
                if backend._outage.since is not None:  # (two lookups while all is well)
                    backend._outage.succeeded()
                return
            except BaseException as failed:
                _roll_back(backend, conn, failed)
                raise
        _roll_back(backend, conn, exc)
    finally:
        backend._writer.release()


def _roll_back(backend: SQLiteDialect, conn: sqlite3.Connection, exc: BaseException) -> None:
    if conn.in_transaction:
        conn.execute("ROLLBACK")
    if isinstance(exc, sqlite3.Error):
        raise backend._storage_error(exc) from None


class Transaction:
    """One write transaction of a backend, as a context manager (``begin`` and ``end``)."""

    __slots__ = ("_backend", "_conn", "_durable")

    def __init__(self, backend: SQLiteDialect, durable: bool) -> None:
        self._backend = backend
        self._durable = durable

    def __enter__(self) -> sqlite3.Connection:
        self._conn = begin(self._backend, self._durable)
        return self._conn

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        end(self._backend, self._conn, exc)


@contextmanager
def briefly(backend: SQLiteDialect, seconds: float = 0.25) -> Iterator[None]:
    """Writes of this thread wait for a busy database at most ``seconds``, then fail
    without reporting an outage: background housekeeping (the figures' flush) gives way
    to a user's call instead of holding the process's writer lock while it waits."""
    local = backend._local
    before, local.patience = local.patience, seconds
    try:
        yield
    finally:
        local.patience = before


def statements(script: str) -> Iterator[str]:
    """A migration script's statements, one by one (SQLite runs one per ``execute``)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                yield buffer
            buffer = ""
    if buffer.strip() and not all(
            ln.strip().startswith("--") or not ln.strip() for ln in buffer.splitlines()):
        raise SchemaError(f"incomplete SQL statement in migration: {buffer[:80]!r}")


@functools.lru_cache(maxsize=64)
def targets(stored: str | None) -> tuple[float, ...] | None:
    """A deadline-order queue's targets as its row stores them (a JSON array)."""
    return None if stored is None else tuple(json.loads(stored))


def send_key(m: NewMessage, now: float, aging: float | None,
             deadlines: tuple[float, ...] | None) -> float:
    """A new message's sort key under its queue's aging and targets as read just now."""
    return sort_key(m.priority, now + m.delay, aging,
                    None if deadlines is None else deadlines[m.priority])


def functions(conn: sqlite3.Connection, clock: Callable[[], float]) -> None:
    """hailq's SQL functions, one definition for Python and SQL: rule 16's sort key
    (aging alone for migrations, and a deadline's target), a retry policy's backoff,
    read from the queue's row where a nack runs (rule 39; random, so not deterministic),
    and the broker's clock (history's trigger, rule 40)."""
    for arity in (3, 4):
        conn.create_function("hailq_sort_key", arity, sort_key, deterministic=True)
    conn.create_function("hailq_backoff", 2, stored_backoff)
    conn.create_function("hailq_now", 0, clock)
