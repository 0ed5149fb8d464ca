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
import collections
import contextlib
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")
_Job = tuple[Callable[[], Any], Any]  # the call, and the future its caller awaits


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():  # its caller was cancelled meanwhile
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


class LoopThreads(Executor):
    """Up to ``size`` threads, started as calls need them, serving one event loop.

    A call goes to the thread that became idle last: a caller's next call, made once
    the previous one settles, finds the thread it just used, whose SQLite connection
    has the pages that call read and wrote in its cache. Handed to any waiting thread,
    consecutive calls went round every connection, and each re-read what the others
    had written since it last ran."""

    def __init__(self, size: int, name: str, loop: asyncio.AbstractEventLoop) -> None:
        self._size, self._name, self._loop = size, name, loop
        self._threads: list[threading.Thread] = []
        self._inboxes: list[queue.SimpleQueue[_Job | None]] = []  # one per thread
        self._idle: list[queue.SimpleQueue[_Job | None]] = []  # the last idle at the end
        self._backlog: collections.deque[_Job] = collections.deque()  # all threads busy
        self._lock = threading.Lock()
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
        job = (fn, answer)
        # An idle thread takes the job, or a new one while there are fewer than
        # ``size``: a job never waits behind another one's thread (a held block's)
        # while a thread may still start.
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new calls after shutdown")
            if self._idle:
                self._idle.pop().put(job)
                return
            if len(self._threads) >= self._size:
                self._backlog.append(job)
                return
            inbox: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
            inbox.put(job)
            thread = threading.Thread(target=self._work, args=(inbox,), daemon=True,
                                      name=f"{self._name}_{len(self._threads)}")
            self._threads.append(thread)
            self._inboxes.append(inbox)
        thread.start()

    def _next(self, inbox: queue.SimpleQueue[_Job | None]) -> _Job | None:
        """A job from the backlog, or None with this thread counted idle."""
        with self._lock:
            if self._backlog:
                return self._backlog.popleft()
            self._idle.append(inbox)
            return None

    def _work(self, inbox: queue.SimpleQueue[_Job | None]) -> None:
        call = self._loop.call_soon_threadsafe
        job = inbox.get()
        while job is not None:
            fn, answer = job
            value, error = None, None
            if not isinstance(answer, Future):
                try:
                    value = fn()
                except BaseException as exc:  # raised in the awaiting coroutine
                    error = exc
                # Idle before the caller hears: its next call comes back to this thread.
                following = self._next(inbox)
                with contextlib.suppress(RuntimeError):  # the loop has ended: nobody waits
                    call(_settle, answer, value, error)
            else:
                if answer.set_running_or_notify_cancel():
                    try:
                        value = fn()
                    except BaseException as exc:
                        error = exc
                following = self._next(inbox)
                if error is not None:
                    answer.set_exception(error)
                elif not answer.cancelled():
                    answer.set_result(value)
            del value, error, fn, answer, job
            job = following if following is not None else inbox.get()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Let each thread end after the calls already handed to it (closing its
        connection with it); with ``wait``, until they have."""
        with self._lock:
            self._closed = True
            for inbox in self._inboxes:
                inbox.put(None)
        if wait:
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join()
