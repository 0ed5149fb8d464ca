"""The sync tests run through ``hailq.aio``: an event loop in a thread of its own, and
sync faces over the async objects, so a scenario written once runs on the sync API and
on the async one (SPEC rule 37)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

from hailq.aio.drivers import Driver
from hailq.backends.base import WaitParams

T = TypeVar("T")


class LoopThread:
    """One event loop running in a daemon thread; ``run`` waits for a coroutine on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="test-aio-loop",
                                        daemon=True)
        self._thread.start()

    def run(self, awaitable: Awaitable[T], timeout: float = 120) -> T:
        async def go() -> T:
            return await awaitable

        return asyncio.run_coroutine_threadsafe(go(), self.loop).result(timeout)

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the loop's thread (what must be made there: readers, tasks)."""
        done: Future[T] = Future()

        def go() -> None:
            try:
                done.set_result(fn())
            except BaseException as exc:
                done.set_exception(exc)

        self.loop.call_soon_threadsafe(go)
        return done.result(60)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


class DrivenBackend:
    """A backend seen through an async driver: every seam call runs as ``hailq.aio``
    runs it (a greenlet on the loop for PostgreSQL, a thread of its own for SQLite),
    and a wait is the loop's own."""

    def __init__(self, driver: Driver, loop: LoopThread) -> None:
        self._driver = driver
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._driver.backend, name)
        if not inspect.ismethod(found) or name.startswith("_"):
            return found
        driver, loop = self._driver, self._loop

        def call(*args: Any, **kwargs: Any) -> Any:
            if any(getattr(a, "connection", None) is not None for a in args):
                # The caller's own connection (rule 3) is used where the caller is, as
                # hailq.aio does (``Driver.joined``)
                return found(*args, **kwargs)
            return loop.run(driver.run(found, *args, **kwargs))

        return call

    @property
    def driven(self) -> Any:
        """The backend the driver runs (for tests that reach inside it)."""
        return self._driver.backend

    def message_wait(self, params: WaitParams) -> None:
        self._loop.run(self._driver.wait(list(params.queues), params.timeout))

    def close(self) -> None:
        self._loop.run(self._driver.close())


class Synced:
    """A sync face over one of ``hailq.aio``'s objects: each awaited call is awaited on
    ``loop`` and its answer given back in the same kind of face, so a test written
    against the sync API runs through the async one."""

    def __init__(self, target: Any, loop: LoopThread) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_loop", loop)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name == "transaction":  # an async context manager: held open across a block
            return lambda: _held(value(), self._loop)
        if not inspect.iscoroutinefunction(value):
            return _synced(value, self._loop)
        loop = self._loop

        def call(*args: Any, **kwargs: Any) -> Any:
            args = tuple(_plain(a) for a in args)
            kwargs = {k: _plain(v) for k, v in kwargs.items()}
            return _synced(loop.run(value(*args, **kwargs)), loop)

        return call

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, value)

    def __enter__(self) -> Synced:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __eq__(self, other: object) -> bool:
        return bool(self._target == _plain(other))

    def __hash__(self) -> int:
        return hash(self._target)

    def __repr__(self) -> str:
        return f"<Synced {self._target!r}>"


@contextlib.contextmanager
def _held(manager: Any, loop: LoopThread) -> Iterator[Any]:
    """An async context manager entered and left on ``loop`` around a sync block; what
    it yields (a connection whose calls are awaited) behind a sync face."""
    conn = loop.run(manager.__aenter__())
    try:
        yield _SyncedConnection(conn, loop)
    except BaseException as exc:
        if not loop.run(manager.__aexit__(type(exc), exc, exc.__traceback__)):
            raise
    else:
        loop.run(manager.__aexit__(None, None, None))


class _SyncedConnection:
    """``execute`` of an async connection (and its cursor's fetches) awaited on the loop."""

    def __init__(self, conn: Any, loop: LoopThread) -> None:
        self._conn, self._loop = conn, loop

    def execute(self, sql: str, params: Any = ()) -> Any:
        cur = self._loop.run(self._conn.execute(sql, params))
        loop = self._loop

        class Cursor:
            def fetchall(self) -> Any:
                return loop.run(cur.fetchall())

            def fetchone(self) -> Any:
                return loop.run(cur.fetchone())

        return Cursor()


def _synced(value: Any, loop: LoopThread) -> Any:
    from hailq.aio.api import _Face

    if isinstance(value, _Face):
        return Synced(value, loop)
    if isinstance(value, list):
        return [_synced(v, loop) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_synced(v, loop) for v in value)
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, Synced):
        return value._target
    if isinstance(value, list | tuple) and any(isinstance(v, Synced) for v in value):
        return [_plain(v) for v in value]
    return value
