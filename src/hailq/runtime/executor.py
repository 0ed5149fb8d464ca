"""Runs handlers: a fixed set of slot threads, plus one event loop thread for ``async def``.

A slot runs one handler at a time. A handler that returns an awaitable (an
``async def`` handler) has it run on the shared event loop while its slot
waits, so async handlers can share clients bound to that loop.
Slot threads are daemons: after the grace period a stuck handler cannot keep
the process alive (its message has been given back by then).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import queue
import threading
from collections.abc import Awaitable, Callable
from typing import Any

Job = Callable[[], None]
log = logging.getLogger("hailq.worker")


class LoopThread:
    """One asyncio event loop in a thread of its own, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def run(self, awaitable: Awaitable[Any]) -> Any:
        """Run ``awaitable`` on the loop; block until it ends; return or raise its result."""
        future = asyncio.run_coroutine_threadsafe(_wrap(awaitable), self._get())
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
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()


async def _wrap(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def call_handler(handler: Callable[[Any], Any], message: Any, loop: LoopThread) -> None:
    """Call ``handler(message)``; if it returns an awaitable, run that on ``loop``."""
    result = handler(message)
    if inspect.isawaitable(result):
        loop.run(result)


class SlotPool:
    """``size`` daemon threads taking jobs from one queue. Never holds more jobs than the
    caller has free slots for, because the caller only submits into free slots."""

    def __init__(self, size: int, name: str = "hailq-slot") -> None:
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True)
                         for i in range(size)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def submit(self, job: Job) -> None:
        self._jobs.put(job)

    def close(self) -> None:
        """Let idle slots end; busy ones end after their job (they are daemons anyway)."""
        for _ in self._threads:
            self._jobs.put(None)

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job()
            except Exception:  # jobs handle their own failures; this one did not
                log.exception("a worker slot's job failed; the slot goes on")
