"""The sync tests run through ``hailq.aio``: an event loop in a thread of its own, and
sync faces over the async objects, so a scenario written once runs on the sync API and
on the async one (SPEC rule 37)."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine
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

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

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
