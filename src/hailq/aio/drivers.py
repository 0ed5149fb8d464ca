"""How an async broker drives the one storage implementation: PostgreSQL in a greenlet
on the event loop (``greenlets.spawn``), SQLite in a small pool of threads of its own,
each with its own connection (SQLite's connections are kept per thread: coroutines
sharing one would nest ``BEGIN``s and steal each other's wake-ups). Either way a
waiting receive holds no thread: PostgreSQL waits on the broker's LISTEN task, SQLite
on the database folder's inotify descriptor, read by the loop (``loop.add_reader``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from functools import partial
from typing import Any, TypeVar

from hailq import committer
from hailq.aio.held import HeldGreenlet, ThreadHeld
from hailq.aio.threads import LoopThreads
from hailq.backends.base import WaitParams
from hailq.backends.dialect import Tx
from hailq.backends.sql import SqlBackend
from hailq.backends.sqlite.watch import FolderWatch
from hailq.errors import HailqError
from hailq.queue import Queue

T = TypeVar("T")
SQLITE_THREADS = 4  # SQLite has one writer at a time: more threads would only queue
SENDING_THREADS = 32  # sends that may share one commit (they wait, they do not write)
_RECHECK = 0.1  # seconds between looks for messages that became due by time alone
_EAGER = 0.05  # seconds of quick looks after a write was seen, until its commit shows


class SyncCallOnLoop(HailqError):
    """A call of an async broker's storage was made without ``await`` on its event loop
    (a sync method called where the async one was meant): it would block the loop."""


class WrongEventLoop(HailqError):
    """An async broker was used from an event loop other than the one it connected in."""


class Driver(ABC):
    """Runs the sync storage code of one broker for coroutines of one event loop."""

    def __init__(self, backend: SqlBackend, loop: asyncio.AbstractEventLoop) -> None:
        self.backend = backend
        self.loop = loop

    def check_loop(self) -> None:
        """WrongEventLoop unless called from the broker's own event loop."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not self.loop:
            raise WrongEventLoop("this async hailq broker belongs to the event loop it was "
                                 "connected in; connect another broker in this loop")

    @abstractmethod
    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``, sync storage code, run to its end without blocking
        the loop."""

    async def joined(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``run`` for a call in the caller's own transaction (``connection=``)."""
        return await self.run(fn, *args, **kwargs)

    async def sending(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``run`` for a send or publish without a caller's transaction: concurrent
        ones share commits (``hailq/committer.py``)."""
        return await self.run(fn, *args, **kwargs)

    @abstractmethod
    def hold(self, make: Callable[[], AbstractContextManager[Any]],
             ) -> AbstractAsyncContextManager[Any]:
        """``make()``, a sync context manager of the storage core, entered and left by
        this driver around the caller's ``async with`` block (``held.py``)."""

    @abstractmethod
    async def wait(self, queues: Sequence[str], timeout: float) -> None:
        """Return when a message may have become receivable in ``queues``, or after
        ``timeout`` seconds, holding no thread meanwhile."""

    async def close(self) -> None:
        """Close the backend's connections (awaited; never left to a finalizer)."""
        await self.run(self.backend.close)

    @abstractmethod
    def abandon(self) -> None:
        """Let go of what the driver holds once its event loop has ended (a server whose
        loop stopped before the app was closed): what needs no loop is closed now."""


class GreenletDriver(Driver):
    """PostgreSQL: the dialect's driver calls are awaited on the loop (``postgres.py``)."""

    def __init__(self, backend: SqlBackend, loop: asyncio.AbstractEventLoop) -> None:
        from hailq.aio.greenlets import spawn  # greenlet comes with hailq[postgres]

        super().__init__(backend, loop)
        self._spawn = spawn

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self.check_loop()
        if kwargs:
            return await self._spawn(partial(fn, *args, **kwargs))
        return await self._spawn(fn, *args)

    async def wait(self, queues: Sequence[str], timeout: float) -> None:
        await self.run(self.backend.message_wait, WaitParams(queues, timeout))

    def hold(self, make: Callable[[], AbstractContextManager[Any]],
             ) -> AbstractAsyncContextManager[Any]:
        self.check_loop()
        return HeldGreenlet(make)

    def abandon(self) -> None:
        abandon = getattr(self.backend.dialect, "abandon", None)
        if abandon is not None:
            abandon()


class ThreadDriver(Driver):
    """SQLite: calls in a few threads of the broker's own; waits on the loop."""

    def __init__(self, backend: SqlBackend, loop: asyncio.AbstractEventLoop,
                 path: str, poll_interval: float) -> None:
        super().__init__(backend, loop)
        self._pool = LoopThreads(SQLITE_THREADS, "hailq-aio-sqlite", loop)
        # Sends of their own, more of them: a send that overlaps others waits in its
        # thread for the committer's shared commit, so the number of these threads is
        # the number of sends one commit can take.
        self._senders = ThreadPoolExecutor(SENDING_THREADS,
                                           thread_name_prefix="hailq-aio-sqlite-send")
        self._wakeups = _Wakeups(self, os.path.dirname(path), poll_interval)
        self._spawn: Callable[..., Any] | None = None
        with contextlib.suppress(ImportError):  # greenlet comes with hailq[postgres]
            from hailq.aio.greenlets import await_only, driven, spawn

            def awaiting() -> committer.Awaiting | None:
                # In a greenlet of a loop's coroutine: the loop its commit is told on
                # (all of a commit's sends of that loop in one callback), and the await.
                return (asyncio.get_running_loop(), await_only) if driven() else None

            committer.on_loop = awaiting
            self._spawn = spawn

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self.check_loop()
        return await self._pool.run(partial(fn, *args, **kwargs) if args or kwargs else fn)

    async def sending(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self.check_loop()
        queue = getattr(fn, "__self__", None)
        if self._spawn is not None and isinstance(queue, Queue) and not queue._hooks:
            # A queue's send writes nothing itself: it builds its messages here and
            # hands them to the committer thread, its coroutine awaiting their commit
            # (``_await_commit``) in a greenlet on the loop. No thread waits per send,
            # and every send in flight can join the next commit.
            sent: T = await self._spawn(partial(fn, *args, **kwargs))
            return sent
        # A publish, or hooks (the user's code, which may block): in a thread.
        return await self.loop.run_in_executor(self._senders,
                                               partial(fn, *args, **kwargs))

    async def joined(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        # A caller's sqlite3 connection works only in the thread that opened it: its
        # transaction is the caller's, on the caller's thread, as with the sync API.
        self.check_loop()
        return fn(*args, **kwargs)

    def hold(self, make: Callable[[], AbstractContextManager[Any]],
             ) -> AbstractAsyncContextManager[Any]:
        self.check_loop()
        return ThreadHeld(make, self._pool, self.loop)

    async def wait(self, queues: Sequence[str], timeout: float) -> None:
        self.check_loop()
        # A queue out of tokens is waited on from its next token on (rule 33): a read.
        queues, timeout = await self.run(self.backend.messages.wait_plan,
                                         WaitParams(queues, timeout))
        if queues:
            await self._wakeups.wait(tuple(queues), timeout)
        else:
            await asyncio.sleep(max(timeout, 0.001))

    def abandon(self) -> None:
        self._wakeups.close(loop_ended=True)
        self._pool.shutdown(wait=False)
        self._senders.shutdown(wait=False)

    async def close(self) -> None:
        self._wakeups.close()
        # Each thread's connection closes as its thread ends (they are kept per thread).
        for pool in (self._pool, self._senders):
            await self.loop.run_in_executor(None, partial(pool.shutdown, wait=True))


class _Wakeups:
    """The waiting receivers of one SQLite broker, by the queues they wait for: one look
    (``claimable``, in a thread) per wake-up for all of them, whatever their number."""

    def __init__(self, driver: ThreadDriver, folder: str, poll_interval: float) -> None:
        self._driver = driver
        self._poll = poll_interval
        self._waiting: dict[tuple[str, ...], set[asyncio.Future[None]]] = {}
        self._changed = asyncio.Event()
        self._eager_until = 0.0
        self._task: asyncio.Task[None] | None = None
        self._watch = FolderWatch.open(folder)
        # Read only while someone waits: every commit writes to the folder, and a loop
        # reading the descriptor all along woke for each receive's and each ack's.
        self._reading = False

    def _written(self) -> None:  # the folder's descriptor is readable: a file was written
        assert self._watch is not None
        self._watch.drain()
        self._eager_until = time.monotonic() + _EAGER
        self._changed.set()

    async def wait(self, queues: tuple[str, ...], timeout: float) -> None:
        if timeout <= 0:
            return
        woken: asyncio.Future[None] = self._driver.loop.create_future()
        self._waiting.setdefault(queues, set()).add(woken)
        if self._watch is not None and not self._reading:
            self._driver.loop.add_reader(self._watch.fileno(), self._written)
            self._reading = True
        self._changed.set()  # a look after this waiter came: nothing between is missed
        if self._task is None or self._task.done():
            self._task = self._driver.loop.create_task(self._look_out())
        try:
            await asyncio.wait((woken,), timeout=timeout)
        finally:
            group = self._waiting.get(queues)
            if group is not None:
                group.discard(woken)
                if not group:
                    del self._waiting[queues]
            if not self._waiting and self._reading and self._watch is not None:
                self._driver.loop.remove_reader(self._watch.fileno())
                self._reading = False

    async def _look_out(self) -> None:
        while self._waiting:
            quick = self._watch is None or time.monotonic() < self._eager_until
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(),
                                       self._poll if quick else _RECHECK)
            self._changed.clear()
            groups = list(self._waiting)
            try:
                found = await self._driver.run(self._driver.backend.dialect.read,
                                               partial(_claimable, groups=groups))
            except HailqError:
                found = groups  # the database is away: the receivers' claims say so
            for queues in found:
                for f in self._waiting.get(queues, ()):
                    if not f.done():
                        f.set_result(None)

    def close(self, loop_ended: bool = False) -> None:
        if self._watch is not None:
            if not loop_ended and self._reading:
                self._driver.loop.remove_reader(self._watch.fileno())
            self._watch.close()
            self._watch = None
        if self._task is not None:
            self._task.cancel()


def _claimable(tx: Tx, groups: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The groups of queues in which a claim may find something now."""
    return [g for g in groups if tx.one("claimable", {"queues": list(g), "now": tx.now})]
