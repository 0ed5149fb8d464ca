"""Receives over HTTP: ``wait=0`` on a path of its own, long polls woken by one waiter
per queue.

A ``wait=0`` receive runs in a small thread pool no long poll ever uses, so any
number of waiting polls never delays it. A long poll holds no thread while it
waits: the polls of one queue share one waiter thread per process, which blocks on
the broker's wake-up (``Broker.wait``: LISTEN/NOTIFY on PostgreSQL, the database
file on SQLite) and on each return wakes the poll that has waited longest; a woken
poll tries a claim that does not wait. A poll that got messages wakes the next one
(two while fewer than ``CLAIM_SLOTS`` are at it), as more may be there; one that
found nothing wakes nobody, and one woken that leaves unclaimed (its client gone)
hands its wake-up on. So a burst is shared out a few claims at a time, and hundreds
of idle polls cost one claim per wake-up, not hundreds.

Before it claims, a poll asks whether its client is still there; a message claimed
for a client that left meanwhile is given back at once (a nack without delay: the
attempt counts, rules 6 and 13), never left in flight for its whole lease.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import anyio
import anyio.to_thread
from starlette.requests import Request

from hailq.broker import Broker
from hailq.message import Message

T = TypeVar("T")
log = logging.getLogger("hailq.serve")

QUICK_THREADS = 8  # wait=0 receives: a path of their own
CLAIM_SLOTS = 8  # claims of woken long polls at once, per process
WAIT_SLICE = 1.0  # seconds a waiter waits at most before it wakes a poll anyway
_SPIN_LIMIT = 0.05  # the longest pause between wake-ups that claimed nothing
LEFT = "the HTTP client left before the message was handed to it"


class Waiter:
    """The one thread of a process that waits on the broker's wake-up for one queue,
    while polls of that queue wait, and the polls it wakes, longest waiting first."""

    def __init__(self, broker: Broker, queue: str, loop: asyncio.AbstractEventLoop,
                 stopping: threading.Event, lock: threading.Lock) -> None:
        self.queue = queue
        self.polls = 0  # guarded by ``lock``
        self.generation = 0  # bumped in the event loop on every wake-up of the broker
        self.busy = 0  # polls woken and not yet through their claim
        self.claimed = False  # a claim since the last wake-up got messages
        self._sleeping: dict[asyncio.Event, None] = {}  # in the order they began
        self._broker = broker
        self._loop = loop
        self._stopping = stopping
        self._lock = lock
        self.thread = threading.Thread(target=self._run, name=f"hailq-poll-{queue}",
                                       daemon=True)

    def sleep(self) -> asyncio.Event:
        """A place in the line of sleeping polls: the event is set when it is woken."""
        event = asyncio.Event()
        self._sleeping[event] = None
        return event

    def sleeping(self) -> int:
        """Polls waiting to be woken."""
        return len(self._sleeping)

    def leave(self, event: asyncio.Event) -> None:
        """Leave the line (woken or not)."""
        self._sleeping.pop(event, None)

    def wake(self, n: int = 1) -> None:
        """Wake the ``n`` polls that have slept longest (in the event loop)."""
        for _ in range(min(n, len(self._sleeping))):
            event = next(iter(self._sleeping))
            del self._sleeping[event]
            self.busy += 1
            event.set()

    def _woken(self) -> None:  # in the event loop: the broker says there may be work
        self.generation += 1
        self.wake(1)

    def _run(self) -> None:
        pause = 0.0
        failing = False
        while not self._stopping.is_set():
            with self._lock:
                if self.polls == 0:
                    return  # the registry made a new waiter if a poll came meanwhile
            began = time.monotonic()
            try:
                self._broker.wait([self.queue], WAIT_SLICE)
                failing = False
            except Exception as exc:  # the database is away: polls claim and get 503
                if not failing:
                    log.warning("long polls on %s: waiting failed (%s); retrying",
                                self.queue, type(exc).__name__)
                failing = True
                self._stopping.wait(0.5)
            fast = time.monotonic() - began < 0.002
            # A queue that shows claimable messages nobody may take (a cap, a rate)
            # returns at once: back off, unless the last wake-up was of use.
            pause = 0.0 if not fast or self.claimed else min(max(pause * 2, 0.001),
                                                              _SPIN_LIMIT)
            self.claimed = False
            try:
                self._loop.call_soon_threadsafe(self._woken)
            except RuntimeError:  # the event loop is closed: the server stopped
                return
            if pause:
                self._stopping.wait(pause)


class Polls:
    """The receive paths of one app: its quick pool, its claim slots and its waiters."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._lock = threading.Lock()
        self._waiters: dict[str, Waiter] = {}
        self._stopping = threading.Event()
        self.quick = anyio.CapacityLimiter(QUICK_THREADS)
        self.claim_threads = anyio.CapacityLimiter(CLAIM_SLOTS)
        self.claim_slots = anyio.Semaphore(CLAIM_SLOTS)

    @contextmanager
    def waiting(self, queue: str) -> Iterator[Waiter]:
        """Count a poll of ``queue`` while it lasts, its queue's waiter running."""
        loop = asyncio.get_running_loop()
        with self._lock:
            waiter = self._waiters.get(queue)
            if waiter is None or not waiter.thread.is_alive():
                waiter = Waiter(self._broker, queue, loop, self._stopping, self._lock)
                self._waiters[queue] = waiter
                waiter.thread.start()
            waiter.polls += 1
        try:
            yield waiter
        finally:
            with self._lock:
                waiter.polls -= 1
                if waiter.polls == 0 and self._waiters.get(queue) is waiter:
                    del self._waiters[queue]  # its thread ends after its current wait

    def waiters(self) -> int:
        """Waiter threads running (one per queue with waiting polls)."""
        with self._lock:
            return sum(1 for w in self._waiters.values() if w.thread.is_alive())

    def close(self) -> None:
        """Stop the waiters, each within its current wait (``WAIT_SLICE`` seconds), so
        none is still in the broker when it closes."""
        self._stopping.set()
        with self._lock:
            running = [w.thread for w in self._waiters.values()]
            self._waiters.clear()
        for thread in running:
            thread.join(WAIT_SLICE + 2)


def polls_of(request: Request) -> Polls:
    polls: Polls = request.app.state.polls
    return polls


async def receive(request: Request, queue: str, wait: float,
                  claim: Callable[[], list[Message]],
                  give_back: Callable[[Message], None]) -> list[Message]:
    """``claim`` (a receive that does not wait) at once, or, with ``wait``, again each
    time the queue's waiter wakes this poll, until it gets messages or ``wait`` seconds
    pass. Nothing is claimed for a client that left, and what was claimed as it left is
    given back."""
    polls = polls_of(request)
    if wait <= 0:
        if await request.is_disconnected():
            return []
        quick = await anyio.to_thread.run_sync(claim, limiter=polls.quick)
        return await _handed(request, quick, give_back, polls.quick) or []
    deadline = time.monotonic() + wait
    left = asyncio.ensure_future(_client_leaves(request))
    try:
        with polls.waiting(queue) as waiter:
            return await _poll(request, polls, waiter, left, deadline, claim, give_back)
    finally:
        left.cancel()


async def _poll(request: Request, polls: Polls, waiter: Waiter, left: asyncio.Future[None],
                deadline: float, claim: Callable[[], list[Message]],
                give_back: Callable[[Message], None]) -> list[Message]:
    woken = False
    while True:
        generation = waiter.generation
        held, woken = woken, False  # a wake-up of the waiter, spent on this claim
        try:
            got = await _claim(request, polls, waiter, claim, give_back)
        finally:
            if held:
                waiter.busy -= 1
        if got is None:  # its client left: the wake-up it held goes to the next poll
            if held:
                waiter.wake(1)
            return []
        if got:  # more may be there: the next poll looks too
            waiter.wake(2 if waiter.busy < CLAIM_SLOTS else 1)
            return got
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return []
        if waiter.generation != generation:
            continue  # the broker woke meanwhile: what it saw may be after the claim
        event = waiter.sleep()
        asleep = asyncio.ensure_future(event.wait())
        try:
            await asyncio.wait((asleep, left), timeout=remaining,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            asleep.cancel()
            waiter.leave(event)
        woken = event.is_set()
        if left.done() or time.monotonic() >= deadline:
            if woken:  # woken as it ends: the wake-up goes to the next poll
                waiter.busy -= 1
                waiter.wake(1)
            return []


async def _client_leaves(request: Request) -> None:
    """Return when the client of ``request`` (whose body was read) disconnects."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _claim(request: Request, polls: Polls, waiter: Waiter,
                 claim: Callable[[], list[Message]],
                 give_back: Callable[[Message], None]) -> list[Message] | None:
    """One claim of a poll: None if its client left, else what it got."""
    async with polls.claim_slots:
        if await request.is_disconnected():
            return None
        got = await anyio.to_thread.run_sync(claim, limiter=polls.claim_threads)
    if got:
        waiter.claimed = True
    return await _handed(request, got, give_back, polls.claim_threads)


async def _handed(request: Request, got: list[Message], give_back: Callable[[Message], None],
                  limiter: anyio.CapacityLimiter) -> list[Message] | None:
    """``got``, or None once given back because the client left while it was claimed."""
    if got and await request.is_disconnected():
        await anyio.to_thread.run_sync(lambda: _give_all_back(got, give_back), limiter=limiter)
        return None
    return got


def _give_all_back(got: list[Message], give_back: Callable[[Message], None]) -> None:
    for message in got:
        try:
            give_back(message)
        except Exception as exc:  # its lease was lost meanwhile: nothing to give back
            log.info("could not give back message %s: %s", message.id, exc)
