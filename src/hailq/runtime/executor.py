"""Runs handlers: a fixed set of slot threads, plus one event loop thread for ``async def``.

A slot runs one handler at a time. A handler that returns an awaitable (an
``async def`` handler) has it run on the shared event loop while its slot
waits, so async handlers can share clients bound to that loop.
Slot threads are daemons: after the grace period a stuck handler cannot keep
the process alive (its message has been given back by then).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import itertools
import logging
import queue
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from hailq.runtime.timelimit import HandlerInterrupted, Running

if TYPE_CHECKING:
    from hailq.aio import AsyncBroker, AsyncMessage
    from hailq.broker import Broker
    from hailq.message import Message

Job = Callable[[], None]
log = logging.getLogger("hailq.worker")


class LoopThread:
    """One asyncio event loop in a thread of its own, started on first use. Async handlers
    get ``hailq.aio``'s message type, through an async broker beside ``broker``."""

    def __init__(self, broker: Broker | None = None) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._broker = broker
        self._async: AsyncBroker | None = None

    @property
    def adopts(self) -> bool:
        """Whether async handlers get ``hailq.aio``'s message type (a worker's loop)."""
        return self._broker is not None

    def adopt(self, message: Message) -> AsyncMessage:
        """``message`` as an async handler gets it (``AsyncBroker.adopt_message``)."""
        if self._async is None:
            from hailq.aio import beside

            assert self._broker is not None
            made = self.run(beside(self._broker))
            with self._lock:
                self._async = self._async or made
        return self._async.adopt_message(message)

    def run(self, awaitable: Awaitable[Any], running: Running | None = None) -> Any:
        """Run ``awaitable`` on the loop; block until it ends; return or raise its result.

        With ``running``, the watchdog can cancel it at its time limit (the wait here
        then ends with ``CancelledError`` at once)."""
        # The coroutine runs in a copy of the caller's context: what hooks made current
        # around the handler (a request id, a tracing span) is current inside it too.
        context = contextvars.copy_context()
        future = asyncio.run_coroutine_threadsafe(_wrap(awaitable, context), self._get())
        if running is not None:
            running.attach(future)
        return future.result()

    def _get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="hailq-asyncio",
                                          daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
            broker, self._async = self._async, None
        if loop is None or thread is None:
            return
        if broker is not None:
            asyncio.run_coroutine_threadsafe(broker.close(), loop).result(timeout)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()


async def _wrap(awaitable: Awaitable[Any], context: contextvars.Context) -> Any:
    # A task of its own, in ``context``; cancelling this one (the time limit) cancels it.
    return await asyncio.get_running_loop().create_task(_await(awaitable), context=context)


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def call_handler(handler: Callable[[Any], Any], message: Any, loop: LoopThread,
                 running: Running | None = None) -> None:
    """Call ``handler(message)``; if it returns an awaitable, run that on ``loop``. An
    ``async def`` handler gets the message as ``hailq.aio.AsyncMessage``."""
    if loop.adopts and inspect.iscoroutinefunction(handler):
        adopted = loop.adopt(message)
        try:
            loop.run(handler(adopted), running)
        finally:
            adopted.settle_back(message)
        return
    result = handler(message)
    if inspect.isawaitable(result):
        loop.run(result, running)


class SlotPool:
    """``size`` daemon threads taking jobs from one queue. Never holds more jobs than the
    caller has free slots for, because the caller only submits into free slots.

    ``replace(thread)`` gives a slot whose thread is stuck (a handler past its time
    limit) a new thread; the old one ends after its job instead of taking another."""

    def __init__(self, size: int, name: str = "hailq-slot") -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._numbers = itertools.count()
        self._threads = [self._thread() for _ in range(size)]
        self._abandoned: set[threading.Thread] = set()

    def _thread(self) -> threading.Thread:
        return threading.Thread(target=self._run, name=f"{self._name}-{next(self._numbers)}",
                                daemon=True)

    @property
    def threads(self) -> int:
        """Threads that take jobs (abandoned ones not counted)."""
        with self._lock:
            return sum(1 for t in self._threads if t not in self._abandoned)

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def submit(self, job: Job) -> None:
        self._jobs.put(job)

    def replace(self, thread: threading.Thread) -> int:
        """Abandon ``thread`` (it ends after its current job) and start another; return
        how many abandoned threads are still running, this one included."""
        with self._lock:
            if thread not in self._threads or thread in self._abandoned:
                return len(self._abandoned)
            self._abandoned.add(thread)
            fresh = self._thread()
            self._threads.append(fresh)
            stuck = len(self._abandoned)
        fresh.start()
        return stuck

    def close(self) -> None:
        """Let idle slots end; busy ones end after their job (they are daemons anyway)."""
        with self._lock:
            alive = [t for t in self._threads if t.is_alive()]
        for _ in alive:
            self._jobs.put(None)

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job()
            except HandlerInterrupted:
                pass  # arrived after the job had caught everything else: its slot was taken
            except Exception:  # jobs handle their own failures; this one did not
                log.exception("a worker slot's job failed; the slot goes on")
            if me in self._abandoned:  # a new thread has this slot now (rare: a look first)
                with self._lock:
                    self._abandoned.discard(me)
                    self._threads.remove(me)
                    return
