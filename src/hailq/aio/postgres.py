"""The PostgreSQL dialect driven on an event loop: the same dialect (its SQL, its
``_call`` retries, its watchdog deadlines, its fast paths), whose every touch of the
driver goes through the adapters below to psycopg's ``AsyncConnection`` and
``AsyncConnectionPool``. Each adapter call hands a coroutine to ``await_only``, so
it runs only inside ``greenlets.spawn`` (the async broker's calls) or, from a
thread of the broker's own, on the broker's loop.

Waits: one LISTEN task per broker on a connection of its own fans notifications out
to the waiters of each queue (futures on the loop, no thread each)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from hailq.aio.committer import LoopCommitter
from hailq.aio.greenlets import await_only, driven, spawn
from hailq.aio.pgconn import LoopConnection, connection_class
from hailq.backends.base import NewMessage
from hailq.backends.postgres.backend import PostgresDialect
from hailq.backends.postgres.listener import _ASK_EVERY, Listener
from hailq.committer import Committer

IDLE = psycopg.pq.TransactionStatus.IDLE
_KEEP = 30.0  # seconds a connection stays at hand before it goes back to its pool


class _Rows:
    """What a statement left: its rows (fetched with it) and its row count."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows, self.rowcount = rows, rowcount

    def fetchall(self) -> list[Any]:
        return self._rows

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None


async def _execute(conn: psycopg.AsyncConnection[Any], query: Any, params: Any,
                   prepare: bool | None) -> _Rows:
    cur = conn.kept_cursor() if isinstance(conn, LoopConnection) else conn.cursor()
    await cur.execute(query, params, prepare=prepare)
    # Rows where the statement returns any: asked of the result's field count, not of
    # ``description``, which builds a Column per field on every call.
    result = cur.pgresult
    rows = await cur.fetchall() if result is not None and result.nfields else []
    return _Rows(rows, cur.rowcount)


class SyncConnection:
    """An ``AsyncConnection`` as the dialect uses a ``Connection``: each call awaited."""

    __slots__ = ("_loop", "raw", "since")

    def __init__(self, raw: psycopg.AsyncConnection[Any],
                 loop: asyncio.AbstractEventLoop) -> None:
        self.raw, self._loop = raw, loop
        self.since = time.monotonic()  # when it left the pool (``SyncPool`` keeps it)

    def execute(self, query: Any, params: Any = None, *,
                prepare: bool | None = None) -> _Rows:
        return await_only(_execute(self.raw, query, params, prepare), self._loop)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        block = self.raw.transaction()
        await_only(block.__aenter__(), self._loop)
        try:
            yield
        except BaseException as exc:
            if not await_only(block.__aexit__(type(exc), exc, exc.__traceback__), self._loop):
                raise
        else:
            await_only(block.__aexit__(None, None, None), self._loop)

    @property
    def prepare_threshold(self) -> int | None:
        return self.raw.prepare_threshold

    @prepare_threshold.setter
    def prepare_threshold(self, value: int | None) -> None:
        self.raw.prepare_threshold = value

    @property
    def pgconn(self) -> Any:  # the watchdog shuts its socket down
        return self.raw.pgconn

    @property
    def info(self) -> Any:
        return self.raw.info

    def close(self) -> None:
        await_only(self.raw.close(), self._loop)


class SyncPool:
    """An ``AsyncConnectionPool`` as the dialect uses a ``ConnectionPool``.

    Calls beyond the pool's size wait their turn in line (``turns``), never past
    ``patience`` seconds (the broker's timeout): coroutines are cheap, and a thousand
    of them asking the pool again every quarter second (as a thread does, to notice a
    server that came back) would lose their place and starve.

    A connection given back healthy and idle is kept at hand (``_idle``) for the next
    call, for up to ``_KEEP`` seconds before it goes back to the pool: taking one from
    the pool and giving it back are two more awaits on every call of the broker."""

    def __init__(self, pool: AsyncConnectionPool[Any], loop: asyncio.AbstractEventLoop,
                 patience: float) -> None:
        self._pool, self._loop, self._patience = pool, loop, patience
        # Turns counted by hand, not with an asyncio.Semaphore under wait_for: a free
        # turn is taken without an await (every call of the broker takes one), and only
        # a call that finds none waits, in line.
        self._free = pool.max_size
        self._line: collections.deque[asyncio.Future[None]] = collections.deque()
        self._idle: list[SyncConnection] = []

    def getconn(self, timeout: float | None = None) -> SyncConnection:
        if not driven():  # from a thread of the broker's: the turns are the loop's
            return await_only(spawn(self.getconn, timeout), self._loop)
        if self._free > 0 and not self._line:
            self._free -= 1
        else:
            await_only(self._turn(), self._loop)
        if self._idle:
            return self._idle.pop()
        try:
            raw = await_only(self._pool.getconn(timeout), self._loop)
        except BaseException:
            self._release()
            raise
        return SyncConnection(raw, self._loop)

    async def _turn(self) -> None:
        mine: asyncio.Future[None] = self._loop.create_future()
        self._line.append(mine)
        try:
            await asyncio.wait_for(mine, self._patience)
        except BaseException as exc:
            if mine.done() and not mine.cancelled():
                self._release()  # handed a turn as this call gave up: pass it on
            with contextlib.suppress(ValueError):
                self._line.remove(mine)
            if isinstance(exc, TimeoutError):
                raise PoolTimeout(f"no connection within {self._patience:g} s") from None
            raise

    def _release(self) -> None:
        """A turn given back: to the first in line still waiting, else kept free."""
        while self._line:
            first = self._line.popleft()
            if not first.done():
                first.set_result(None)
                return
        self._free += 1

    def putconn(self, conn: SyncConnection) -> None:
        if not driven():
            await_only(spawn(self.putconn, conn), self._loop)
            return
        raw = conn.raw
        try:
            if (not raw.closed and raw.pgconn.transaction_status == IDLE
                    and time.monotonic() - conn.since < _KEEP):
                self._idle.append(conn)
            else:  # the pool's to reset, replace or keep
                await_only(self._pool.putconn(raw), self._loop)
        finally:
            self._release()

    def _give_back(self) -> None:
        """The connections kept at hand, back to the pool (before it checks, drains or
        closes its own)."""
        if not driven():
            await_only(spawn(self._give_back), self._loop)
            return
        idle, self._idle = self._idle, []
        for conn in idle:
            await_only(self._pool.putconn(conn.raw), self._loop)

    @contextlib.contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[SyncConnection]:
        conn = self.getconn(timeout)
        try:
            yield conn
        finally:
            self.putconn(conn)

    def check(self) -> None:
        self._give_back()
        await_only(self._pool.check(), self._loop)

    def drain(self) -> None:
        self._give_back()
        await_only(self._pool.drain(), self._loop)

    def close(self) -> None:
        self._give_back()
        await_only(self._pool.close(), self._loop)

    def abandon(self) -> None:
        """Close the idle connections without the loop (it ended): their sockets. The
        pool's worker tasks are finished here too: left to the garbage collector, each
        would end by asking the closed loop to cancel a wait, an error nobody can see
        but the interpreter's "exception ignored" report."""
        idle, self._idle = self._idle, []
        for conn in [*(c.raw for c in idle), *getattr(self._pool, "_pool", ())]:
            with contextlib.suppress(Exception):
                conn.pgconn.finish()
        tasks = [*getattr(self._pool, "_workers", ()), getattr(self._pool, "_sched_runner", None)]
        for task in tasks:
            if isinstance(task, asyncio.Task) and not task.done():
                with contextlib.suppress(RuntimeError):  # "Event loop is closed"
                    task.get_coro().close()


class AsyncListener(Listener):
    """``Listener``'s waits on the event loop: one task LISTENs, waiters are futures by
    queue, woken all at once after every (re)connect (notifications were lost)."""

    def __init__(self, conninfo: str, channel: str, answer_within: float = 5.0,
                 outage: Any = None) -> None:
        super().__init__(conninfo, channel, answer_within, outage)
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Task[None] | None = None
        self._futures: dict[str, set[asyncio.Future[None]]] = {}

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = self._loop.create_task(self._listen())

    def wait(self, queues: tuple[str, ...], timeout: float) -> None:
        self.wait_since(queues, self.state(queues), timeout)

    def wait_since(self, queues: tuple[str, ...], before: tuple[int, ...],
                   timeout: float) -> None:
        await_only(self._wait(queues, before, timeout), self._loop)

    async def _wait(self, queues: tuple[str, ...], before: tuple[int, ...],
                    timeout: float) -> None:
        self._start()
        if self._state(queues) != before or timeout <= 0:
            return
        woken: asyncio.Future[None] = self._loop.create_future()
        names = (*queues, "")  # "": every waiter, on a (re)connect
        for q in names:
            self._futures.setdefault(q, set()).add(woken)
        try:
            await asyncio.wait((woken,), timeout=timeout)
        finally:
            for q in names:
                self._futures.get(q, set()).discard(woken)

    def _wake(self, queue: str | None) -> None:
        if queue is None:
            self._epoch += 1
            waiting = [f for group in self._futures.values() for f in group]
        else:
            self._gen[queue] += 1
            waiting = list(self._futures.get(queue, ()))
        for f in waiting:
            if not f.done():
                f.set_result(None)

    async def _listen(self) -> None:
        delay = 0.05
        while True:
            connecting = True
            try:
                async with await psycopg.AsyncConnection.connect(
                        self._conninfo, autocommit=True) as conn:
                    connecting = False
                    await conn.execute(sql.SQL("LISTEN {}").format(
                        sql.Identifier(self._channel)))
                    if self._outage is not None:
                        self._outage.succeeded()
                    delay = 0.05
                    self._wake(None)
                    while True:
                        async for note in conn.notifies(timeout=_ASK_EVERY):
                            self._wake(note.payload)
                        # The server still answers, within the bound (see Listener).
                        watch = self._watchdog.arm(cast(Any, _Shut(conn)),
                                                   time.monotonic() + self._answer_within)
                        try:
                            await conn.execute("SELECT 1", prepare=False)
                        finally:
                            self._watchdog.disarm(watch)
            except psycopg.Error as exc:
                if connecting and self._outage is not None:
                    self._outage.failed(str(exc).strip().split("\n", 1)[0], attempt=True)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await_only(asyncio.wait((task,)), self._loop)
        self._watchdog.close()
        self._wake(None)


class _Shut:
    """What the watchdog needs of a connection it may drop: the socket; the connection
    itself is closed by its ``async with`` block."""

    __slots__ = ("pgconn",)

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.pgconn = conn.pgconn

    def close(self) -> None:
        pass


class AsyncPostgresDialect(PostgresDialect):
    """``PostgresDialect`` on psycopg's async connections, for one event loop."""

    _closed_when_collected = False
    listener_type = AsyncListener

    def __init__(self, conninfo: str, *, loop: asyncio.AbstractEventLoop,
                 **options: Any) -> None:
        super().__init__(conninfo, **options)
        self.loop = loop
        self._opening: asyncio.Lock | None = None

    def _pools(self) -> tuple[ConnectionPool, ConnectionPool]:
        if self._durable is not None and self._fast is not None:
            return self._durable, self._fast
        # Opening them awaits (a probe, the pools): the calls that come meanwhile wait
        # for these pools rather than open pools of their own.
        if self._opening is None:
            self._opening = asyncio.Lock()
        await_only(self._opening.acquire(), self.loop)
        try:
            return super()._pools()
        finally:
            self._opening.release()

    def _connect_direct(self, limit: int) -> psycopg.Connection[Any]:
        raw = await_only(psycopg.AsyncConnection.connect(self._conninfo,
                                                         connect_timeout=limit), self.loop)
        return cast(psycopg.Connection[Any], SyncConnection(raw, self.loop))

    def _make_pool(self, name: str) -> ConnectionPool:
        kwargs: dict[str, Any] = {"autocommit": True}
        if not self._prepare:
            kwargs["prepare_threshold"] = None
        logs = self._pool_logs

        async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
            logs.configure(cast(psycopg.Connection[Any], conn))

        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            self._conninfo, connection_class=connection_class(), min_size=1,
            max_size=self._pool_size, open=False, kwargs=kwargs,
            name=logs.name(name), configure=configure, timeout=min(5.0, self._timeout),
            reconnect_timeout=0)
        await_only(pool.open(), self.loop)
        return cast(ConnectionPool, SyncPool(pool, self.loop, self._timeout))

    def sleep(self, seconds: float) -> None:
        await_only(asyncio.sleep(seconds), self.loop)

    def make_committer(self, send: Callable[[Sequence[NewMessage]], list[str]],
                       ) -> Committer:
        """Concurrent coroutines' sends share commits on the loop (``committer.py``):
        the thread committer would block the loop waiting for its thread."""
        return LoopCommitter(send, self.loop)

    @classmethod
    def beside(cls, sync: PostgresDialect, loop: asyncio.AbstractEventLoop,
               ) -> AsyncPostgresDialect:
        """A dialect on ``sync``'s database with ``sync``'s settings, for ``loop``."""
        listen = None if sync._listen_to is None else "" if sync._listen_here \
            else sync._listen_to
        return cls(sync._conninfo, loop=loop, display=sync.url_for_display,
                   schema=sync.schema, pool_size=sync._pool_size,
                   poll_interval=sync._poll_interval, timeout=sync._timeout,
                   prepare=sync._prepare, listen=listen)

    def abandon(self) -> None:
        """Let go once the loop ended: the pools' idle connections and the watchdog."""
        for pool in (self._durable, self._fast):
            if isinstance(pool, SyncPool):
                pool.abandon()
        self._durable = self._fast = None
        self._owned.items = []
        self._watchdog.close()


