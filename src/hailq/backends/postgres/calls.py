"""Calls on pooled PostgreSQL connections: two pools per process (durable sends,
relaxed leases and acks), retries through connection failures that never re-run a call
blindly, one deadline per call, and errors that name their cause; calls that could not
reach the database, and the first one that did again, go to the outage report
(``hailq/outage.py``). A mixin of the PostgreSQL dialect (``backend.py``), which
brings the settings it reads."""

from __future__ import annotations

import os
import socket
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
import psycopg.errors
from psycopg_pool import ConnectionPool, PoolTimeout

from hailq.backends.postgres.deadline import Watchdog
from hailq.backends.postgres.listener import Listener
from hailq.backends.postgres.poollog import PoolLogs
from hailq.errors import OutcomeUnknown, StorageError
from hailq.outage import Outage

T = TypeVar("T")
_RETRY_FOR = 8.0  # seconds an operation keeps retrying through connection failures
# Seconds a direct connection may take to name why the pool has none; past the deadline
# less than this, the call fails without it.
_PROBE_TAKES = 2.0
# Seconds a call waits for a pooled connection before asking again. The pool tries once
# to open a connection for its waiting callers; when that fails (the old primary is
# gone, the standby not yet promoted) it tries again only for a caller that asks anew.
_ASK_POOL_EVERY = 0.25
# What a transaction pooler answers when a statement psycopg prepared on one server
# connection runs on another (or a second client prepares the same name there). The
# server refused the statement without running it.
NOT_PREPARED = (psycopg.errors.InvalidSqlStatementName,
                psycopg.errors.DuplicatePreparedStatement)
# SQLSTATEs of a server that cannot take the call (shutting down, starting up, out of
# connection slots) and of a lost connection; an error without one is the client's own
# (refused, timed out, closed).
_UNREACHABLE = ("08", "57P", "53300")


class PooledCalls:
    """``_call`` and the pools it runs on, for the PostgreSQL dialect."""

    url_for_display: str
    _conninfo: str
    _connect_timeout: int
    _timeout: float
    _prepare: bool
    _pool_size: int
    _watchdog: Watchdog
    _pid: int
    _waiter: str
    _durable: ConnectionPool | None
    _fast: ConnectionPool | None
    _listener: Listener | None
    _owned: Owned
    _outage: Outage
    _pool_logs: PoolLogs

    # A backend dropped without close() closes its pools when collected; an async one
    # (hailq.aio) is closed with ``await close()`` only.
    _closed_when_collected = True

    if TYPE_CHECKING:  # the dialect's own: it also stops listening through a pooler
        def _stop_preparing(self) -> None: ...

        def sleep(self, seconds: float) -> None: ...

    def _pools(self) -> tuple[ConnectionPool, ConnectionPool]:
        if self._pid != os.getpid() or self._durable is None or self._fast is None:
            # After fork the parent's pools (and their threads) are unusable: start anew.
            self._probe()
            self._outage.reached()
            self._pid = os.getpid()
            self._waiter = f"{socket.gethostname()}:{self._pid}:{id(self):x}"
            self._durable = self._make_pool("durable")
            self._fast = self._make_pool("fast")
            self._listener = None
            # A backend dropped without close() closes what it opened when it is
            # collected, never leaving it to the pools' own __del__: collected in one of
            # their threads, that one tried to join itself.
            self._owned = Owned([self._watchdog, self._durable, self._fast],
                                here=not self._closed_when_collected)
            if self._closed_when_collected:
                weakref.finalize(self, self._owned.close)
        return self._durable, self._fast

    def _probe(self, within: float | None = None) -> None:
        """Connect once directly, so a wrong host, role or database fails at once and
        clearly instead of after the pool's patient retries; trying each host for at most
        ``within`` seconds (libpq's least is 2) where given."""
        limit = self._connect_timeout if within is None else min(
            self._connect_timeout, max(2, int(within)))
        try:
            self._connect_direct(limit).close()
        except psycopg.Error as exc:
            raise self._unreachable(self._storage_error(exc)) from None

    def _connect_direct(self, limit: int) -> psycopg.Connection[Any]:
        """A connection of its own, outside the pools (``_probe``)."""
        return psycopg.connect(self._conninfo, connect_timeout=limit)

    def _make_pool(self, name: str) -> ConnectionPool:
        # No session settings: through a transaction pooler they would stay on a server
        # connection that another client's transaction gets next. Nor, there, prepared
        # statements: the next statement of this connection may run on another one.
        kwargs: dict[str, Any] = {"autocommit": True}
        if not self._prepare:
            kwargs["prepare_threshold"] = None
        # Named and configured so that its warnings go to this backend's outage report.
        return ConnectionPool(
            self._conninfo, min_size=1, max_size=self._pool_size, open=True, kwargs=kwargs,
            name=self._pool_logs.name(name), configure=self._pool_logs.configure,
            timeout=min(5.0, self._timeout), reconnect_timeout=0)

    def _call(self, durable: bool, fn: Callable[[psycopg.Connection[Any]], T],
              rerun: Callable[[psycopg.Connection[Any]], T] | None = None,
              writes: bool = True) -> T:
        """Run ``fn`` on a pooled connection; retry on fresh ones after connection failures
        (a restarted server, killed sessions) for up to ``_RETRY_FOR`` seconds. The whole
        call, retries included, ends within ``timeout`` seconds (rule 31): past it the
        watchdog drops the connection and the call fails, naming the deadline.

        A failure after ``fn`` started leaves its outcome unknown: its commit may have
        gone through before the connection broke. Such a call is never re-run blindly:
        the retry runs ``rerun`` (which finds out what the first try did) where given,
        else ``fn`` again, for calls whose re-run cannot change an outcome twice. If it
        fails for good, a call that ``writes`` raises OutcomeUnknown."""
        now = time.monotonic()
        deadline = now + self._timeout
        retry_until = now + min(_RETRY_FOR, self._timeout)
        delay = 0.05
        started = False
        while True:
            pool = self._pools()[0 if durable else 1]
            tried = time.monotonic()  # (on the outage's clock)
            watch = None
            prepared = False  # this try's connection may prepare statements
            try:
                wait = max(min(retry_until, deadline) - time.monotonic(), 0.5)
                # getconn/putconn and arm/disarm, not their context managers: the pool's
                # connection() block also commits on the way out, a no-op under
                # autocommit that still takes the connection's lock, on every call.
                conn = pool.getconn(timeout=min(wait, _ASK_POOL_EVERY))
                try:
                    watch = self._watchdog.arm(conn, deadline)
                    try:
                        self._unprepared(conn)
                        prepared = conn.prepare_threshold is not None
                        if started and rerun is not None:
                            done = rerun(conn)
                        else:
                            started = True
                            done = fn(conn)
                        self._outage.succeeded(began=tried)
                        return done
                    finally:
                        self._watchdog.disarm(watch)
                finally:
                    # A transaction left open (never on success: statements autocommit
                    # and atomic() blocks end themselves) is rolled back by the pool.
                    pool.putconn(conn)
            except psycopg.OperationalError as exc:
                if watch is not None and watch.fired:
                    # A server that stopped answering: its other idle connections would
                    # each hold the next calls until their deadlines. Replace them all.
                    pool.drain()
                    raise self._unreachable(self._timed_out(started and writes),
                                            began=now) from None
                if isinstance(exc, PoolTimeout) and time.monotonic() < min(retry_until,
                                                                           deadline):
                    continue  # ask again: the pool then tries a new connection
                if time.monotonic() + delay >= min(retry_until, deadline):
                    if isinstance(exc, PoolTimeout):
                        if deadline - time.monotonic() < _PROBE_TAKES:
                            raise self._unreachable(StorageError(
                                f"PostgreSQL {self.url_for_display}: no connection within "
                                f"{self._timeout:g} s (the URL's timeout option)"),
                                began=now) from None
                        # Names the cause (refused, unknown host...) if it can.
                        self._probe(deadline - time.monotonic())
                    raise self._unreachable(self._storage_error(exc, started and writes),
                                            exc, began=now) from None
                pool.check()  # drop every broken idle connection, not just this one
                self.sleep(delay)
                delay = min(delay * 2, 1.0)
            except NOT_PREPARED as exc:
                if not prepared:
                    raise self._storage_error(exc) from None
                self._stop_preparing()
                # Behind a transaction pooler the URL did not name: prepare nothing from
                # now on. The refused statement did not run (a transaction around it
                # rolled back); what ran before it is the rerun's to find, as after a
                # broken connection.
            except psycopg.Error as exc:
                raise self._storage_error(exc) from None

    def _unprepared(self, conn: psycopg.Connection[Any]) -> None:
        """A pooled connection opened before prepared statements were turned off keeps
        psycopg's threshold; take it away before the connection runs anything."""
        if not self._prepare and conn.prepare_threshold is not None:
            conn.prepare_threshold = None

    def _unreachable(self, error: StorageError, exc: BaseException | None = None,
                     began: float | None = None) -> StorageError:
        """``error``, reported to the outage log first where it says the database could
        not be reached: always without ``exc``, else as ``exc``'s SQLSTATE says.
        ``began``: when the failed call started (``time.monotonic()``)."""
        state = getattr(exc, "sqlstate", None)
        if exc is None or state is None or state.startswith(_UNREACHABLE):
            error.during_outage = self._outage.failed(
                str(error).removeprefix(f"PostgreSQL {self.url_for_display}: "), began=began)
        return error

    def _storage_error(self, exc: BaseException, unknown: bool = False) -> StorageError:
        text = _first_lines(exc)
        cause = f"PostgreSQL {self.url_for_display}: {text}"
        return OutcomeUnknown(cause) if unknown else StorageError(cause)

    def _timed_out(self, unknown: bool) -> StorageError:
        cause = (f"PostgreSQL {self.url_for_display}: no answer within {self._timeout:g} s "
                 "(the URL's timeout option); the connection was dropped")
        return OutcomeUnknown(cause) if unknown else StorageError(cause)


class Owned:
    """The pools and listener one backend opened in this process, closed once."""

    def __init__(self, items: list[ConnectionPool | Listener | Watchdog],
                 here: bool = False) -> None:
        """``here``: always closed in the calling thread. An async dialect's are: its
        close is awaited on the loop, and in a thread of their own they could not be
        awaited (the loop may have ended by the time it ran)."""
        self.items = items
        self._pid = os.getpid()
        self.here = here

    def close(self) -> None:
        items, self.items = self.items, []
        if not items or self._pid != os.getpid():
            return  # nothing opened, or a forked child's copy of the parent's
        if not self.here and threading.current_thread().name.startswith("hailq-"):
            # Collected in one of their own threads: it cannot join itself.
            threading.Thread(target=_close_all, args=(items,), daemon=True,
                             name="closing-hailq").start()
        else:
            _close_all(items)


def _close_all(items: list[ConnectionPool | Listener | Watchdog]) -> None:
    for item in reversed(items):  # the listener first, then the pools, then the watchdog
        item.close()


def _first_lines(exc: BaseException) -> str:
    """The cause in one line: the first line of libpq's message, or with several hosts
    (a multi-host URL) why each one failed, since any of them may be the one that matters."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    hosts = [line.split("connection failed: ", 1)[-1] for line in lines
             if line.startswith("- host:")]
    if hosts:
        return "; ".join(hosts)
    return lines[0] if lines else type(exc).__name__
