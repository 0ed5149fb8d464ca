"""The threads an async SQLite broker runs its storage calls in (``drivers.ThreadDriver``).

A call hops to a thread and back with one ``SimpleQueue.put`` and one
``call_soon_threadsafe``, settling an asyncio future directly: measured here, half
the CPU time and wall time of ``loop.run_in_executor`` on a ``ThreadPoolExecutor``
(whose concurrent future, its condition and the asyncio future chained to it cost
as much again as the hop itself), and a receive+ack through hailq.aio is two hops.
Each thread keeps its own SQLite connection, as every thread does (rule 28). As an
``Executor`` they also hold a transaction's block in one thread (``held.ThreadHeld``).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():  # its caller was cancelled meanwhile
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


class LoopThreads(Executor):
    """Up to ``size`` threads, started as calls need them, serving one event loop."""

    def __init__(self, size: int, name: str, loop: asyncio.AbstractEventLoop) -> None:
        self._size, self._name, self._loop = size, name, loop
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Any] | None] = \
            queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = 0  # threads waiting for a job
        self._counting = threading.Lock()
        self._closed = False

    async def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` in one of the threads, awaited."""
        answer: asyncio.Future[T] = self._loop.create_future()
        self._put(fn, answer)
        return await answer

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """``Executor.submit``: for a call that holds its thread a while (a block)."""
        done: Future[T] = Future()
        self._put(lambda: fn(*args, **kwargs), done)
        return done

    def _put(self, fn: Callable[[], Any], answer: Any) -> None:
        if self._closed:
            raise RuntimeError("cannot schedule new calls after shutdown")
        # Each job reserves an idle thread, or starts one while there are fewer than
        # ``size``: a job never waits behind another one's thread (a held block's).
        with self._counting:
            start = self._idle == 0 and len(self._threads) < self._size
            if not start and self._idle:
                self._idle -= 1
        self._jobs.put((fn, answer))
        if start:
            thread = threading.Thread(target=self._work, daemon=True,
                                      name=f"{self._name}_{len(self._threads)}")
            self._threads.append(thread)
            thread.start()

    def _work(self) -> None:
        call = self._loop.call_soon_threadsafe
        counting = self._counting
        while (job := self._jobs.get()) is not None:
            fn, answer = job
            value, error = None, None
            if not isinstance(answer, Future):
                try:
                    value = fn()
                except BaseException as exc:  # raised in the awaiting coroutine
                    error = exc
                with contextlib.suppress(RuntimeError):  # the loop has ended: nobody waits
                    call(_settle, answer, value, error)
            elif answer.set_running_or_notify_cancel():
                try:
                    answer.set_result(fn())
                except BaseException as exc:
                    answer.set_exception(exc)
            del value, error, fn, answer, job
            with counting:
                self._idle += 1

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Let each thread end after the calls already handed to it (closing its
        connection with it); with ``wait``, until they have."""
        self._closed = True
        for _ in self._threads:
            self._jobs.put(None)
        if wait:
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join()
