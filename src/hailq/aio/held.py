"""A sync context manager of the storage core held open across a caller's ``async with``
block (``AsyncMessage.transaction``): the one ``Message.transaction``, entered and
left by the broker's driver, the block between them the caller's coroutine.

- PostgreSQL (``held_in_greenlet``): the context manager runs in a greenlet of its
  own, paused at its ``yield`` while the block runs; its statements are awaited on
  the loop like any call's.
- SQLite (``ThreadHeld``): one thread of the driver's holds the transaction (an
  SQLite connection serves only the thread that opened it); the block's statements
  go to that thread and are awaited (``ThreadConnection``).

An exception in the block is thrown into the context manager as ``_BlockFailed``, so
that it rolls back; the block's own exception then reaches the caller unchanged.
"""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from contextlib import AbstractContextManager
from typing import Any, TypeVar

T = TypeVar("T")


class _BlockFailed(Exception):
    """The caller's block raised: roll back (the caller sees its own exception)."""


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


class HeldGreenlet:
    """``make()`` entered in a greenlet that waits at its ``yield`` for the block's end
    (PostgreSQL: ``greenlets.spawn``'s protocol, paused in the middle)."""

    def __init__(self, make: Callable[[], AbstractContextManager[T]]) -> None:
        self._make = make
        self._child: Any = None

    async def __aenter__(self) -> Any:
        from hailq.aio.greenlets import Entered, drive, driven_child, pause

        make = self._make

        def body() -> None:
            try:
                with make() as value:
                    if pause(value):  # True: the block failed
                        raise _BlockFailed
            except _BlockFailed:
                pass  # rolled back; the block's own exception reaches the caller

        self._child = driven_child(body)
        found = await drive(self._child, self._child.switch())
        assert isinstance(found, Entered)
        return found.value

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: object) -> bool:
        from hailq.aio.greenlets import drive, resume

        await drive(self._child, resume(self._child, exc is not None))
        return False


class ThreadConnection:
    """The transaction's ``sqlite3.Connection`` for a coroutine: ``await
    conn.execute(sql, parameters)`` runs the statement in the thread that holds the
    transaction; its rows are fetched with it (``await cursor.fetchall()``)."""

    def __init__(self, held: ThreadHeld) -> None:
        self._held = held

    async def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] = (),
                      ) -> Fetched:
        """Run one statement in the transaction."""
        def run(conn: Any) -> Fetched:
            cur = conn.execute(sql, parameters)
            return Fetched(cur.fetchall(), cur.rowcount)

        return await self._held.ask(run)


class Fetched:
    """A statement's rows and row count, as an async cursor hands them over."""

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows, self.rowcount = rows, rowcount

    async def fetchall(self) -> list[Any]:
        """Every row."""
        return self._rows

    async def fetchone(self) -> Any:
        """The first row, or None."""
        return self._rows[0] if self._rows else None


class ThreadHeld:
    """``make()`` entered and left in one thread of ``pool`` (SQLite), the block's
    statements sent to that thread."""

    def __init__(self, make: Callable[[], AbstractContextManager[Any]], pool: Executor,
                 loop: asyncio.AbstractEventLoop) -> None:
        self._make, self._pool, self._loop = make, pool, loop
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()

    async def __aenter__(self) -> ThreadConnection:
        entered: asyncio.Future[None] = self._loop.create_future()
        self._done = self._loop.run_in_executor(self._pool, self._hold, entered)
        await asyncio.wait((entered, self._done), return_when=asyncio.FIRST_COMPLETED)
        if not entered.done():
            await self._done  # it failed before the block (LeaseLost): raised here
        return ThreadConnection(self)

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: object) -> bool:
        self._jobs.put(exc is not None)  # the block's end: failed or not
        await self._done
        return False

    async def ask(self, job: Callable[[Any], T]) -> T:
        """``job(conn)`` in the holding thread."""
        answer: asyncio.Future[T] = self._loop.create_future()
        self._jobs.put((job, answer))
        return await answer

    def _hold(self, entered: asyncio.Future[None]) -> None:
        call = self._loop.call_soon_threadsafe
        try:
            with self._make() as conn:
                call(_settle, entered, None, None)
                while not isinstance(job := self._jobs.get(), bool):
                    work, answer = job
                    try:
                        call(_settle, answer, work(conn), None)
                    except Exception as exc:  # the statement's: the block decides
                        call(_settle, answer, None, exc)
                if job:
                    raise _BlockFailed
        except _BlockFailed:
            pass  # rolled back; the block's own exception reaches the caller
