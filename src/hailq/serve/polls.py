"""Receives over HTTP, on the async API (``hailq.aio``): ``wait=0`` and long polls are
coroutines of the server's event loop, and none of them holds a thread.

The server's sync broker gets an async twin for the loop (``hailq.aio.beside``: the
same database, hooks and figures). A ``wait=0`` receive is one awaited claim. The
long polls of one queue share one waiter task, which awaits the broker's wake-up
(``AsyncBroker.wait``: LISTEN/NOTIFY on PostgreSQL, the database folder's inotify
descriptor on SQLite) and on each return wakes the poll that has waited longest; a
woken poll tries a claim that does not wait. A poll that got messages wakes the next
one (two while fewer than ``CLAIM_SLOTS`` are at it), as more may be there; one that
found nothing wakes nobody, and one woken that leaves unclaimed (its client gone)
hands its wake-up on. So a burst is shared out a few claims at a time, and hundreds
of idle polls cost one claim per wake-up, not hundreds.

Before it claims, a poll asks whether its client is still there; a message claimed
for a client that left meanwhile is given back at once (``give_back``: no failure, so
it keeps its place in line and is never dead-lettered for it, even on its last
attempt; the delivery still counts, rule 6), never left in flight for its whole lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import anyio
from starlette.requests import Request

from hailq.aio import AsyncBroker, AsyncQueue, beside
from hailq.broker import Broker
from hailq.message import Message

log = logging.getLogger("hailq.serve")

QUICK_CLAIMS = 8  # wait=0 receives under way at once: a path of their own
CLAIM_SLOTS = 8  # claims of woken long polls at once, per process
WAIT_SLICE = 1.0  # seconds a waiter waits at most before it wakes a poll anyway
_SPIN_LIMIT = 0.05  # the longest pause between wake-ups that claimed nothing
LEFT = "the HTTP client left before the message was handed to it"
Claim = Callable[[], Awaitable[list[Message]]]
GiveBack = Callable[[Message], Awaitable[None]]


class Waiter:
    """The one task of a process that waits on the broker's wake-up for one queue,
    while polls of that queue wait, and the polls it wakes, longest waiting first."""

    def __init__(self, polls: Polls, queue: str) -> None:
        self.queue = queue
        self.polls = 0
        self.generation = 0  # bumped on every wake-up of the broker
        self.busy = 0  # polls woken and not yet through their claim
        self.claimed = False  # a claim since the last wake-up got messages
        self._sleeping: dict[asyncio.Event, None] = {}  # in the order they began
        self._owner = polls
        self.task = asyncio.get_running_loop().create_task(self._run())

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
        """Wake the ``n`` polls that have slept longest."""
        for _ in range(min(n, len(self._sleeping))):
            event = next(iter(self._sleeping))
            del self._sleeping[event]
            self.busy += 1
            event.set()

    async def _run(self) -> None:
        pause = 0.0
        failing = False
        while self.polls > 0 and not self._owner.stopping:
            began = time.monotonic()
            try:
                broker = await self._owner.broker()
                await broker.wait([self.queue], WAIT_SLICE)
                failing = False
            except Exception as exc:  # the database is away: polls claim and get 503
                if not failing:
                    log.warning("long polls on %s: waiting failed (%s); retrying",
                                self.queue, type(exc).__name__)
                failing = True
                await asyncio.sleep(0.5)
            took = time.monotonic() - began
            fast = took < 0.002
            # A queue that shows claimable messages nobody may take (a cap, a rate)
            # returns at once: back off, unless the last wake-up was of use.
            pause = 0.0 if not fast or self.claimed else min(max(pause * 2, 0.001),
                                                              _SPIN_LIMIT)
            self.claimed = False
            if took < WAIT_SLICE * 0.95:
                # Woken, not timed out: a claim under way may have missed what woke it.
                # (A thousand polls' first claims can take longer than a slice; were
                # they all to claim again after every slice, none would ever sleep.)
                self.generation += 1
            self.wake(1)
            if pause:
                await asyncio.sleep(pause)


class Polls:
    """The receive paths of one app: its async broker, its claim limits and waiters."""

    def __init__(self, broker: Broker) -> None:
        self._sync = broker
        self._async: AsyncBroker | None = None
        self._opening: asyncio.Lock | None = None
        self._waiters: dict[str, Waiter] = {}
        self.stopping = False
        self.quick = anyio.CapacityLimiter(QUICK_CLAIMS)
        self.claims = anyio.CapacityLimiter(CLAIM_SLOTS)
        self.claim_slots = anyio.Semaphore(CLAIM_SLOTS)

    async def broker(self) -> AsyncBroker:
        """The async broker of the running loop (made at the first receive)."""
        if self._async is None:
            if self._opening is None:
                self._opening = asyncio.Lock()
            async with self._opening:
                if self._async is None:
                    self._async = await beside(self._sync)
        return self._async

    async def get_queue(self, name: str) -> AsyncQueue:
        """Queue ``name`` on the async broker; QueueNotFound if it was never declared."""
        return await (await self.broker()).get_queue(name)

    @contextmanager
    def waiting(self, queue: str) -> Iterator[Waiter]:
        """Count a poll of ``queue`` while it lasts, its queue's waiter running."""
        waiter = self._waiters.get(queue)
        if waiter is None or waiter.task.done():
            waiter = self._waiters[queue] = Waiter(self, queue)
        waiter.polls += 1
        try:
            yield waiter
        finally:
            waiter.polls -= 1
            if waiter.polls == 0 and self._waiters.get(queue) is waiter:
                del self._waiters[queue]  # its task ends after its current wait

    def waiters(self) -> int:
        """Waiter tasks running (one per queue with waiting polls)."""
        return sum(1 for w in list(self._waiters.values()) if not w.task.done())

    def close(self) -> None:
        """Stop the waiters and close the async broker: awaited on its loop while that
        runs, else (the server's loop already ended) let go of what it held."""
        self.stopping = True
        broker, self._async = self._async, None
        self._waiters.clear()
        if broker is None:
            return
        loop = broker.loop
        if loop.is_running():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(broker.close(), loop).result(WAIT_SLICE + 10)
        elif not loop.is_closed():
            loop.run_until_complete(broker.close())
        else:
            broker.driver.abandon()


def polls_of(request: Request) -> Polls:
    polls: Polls = request.app.state.polls
    return polls


async def receive(request: Request, wait: float, claim: Claim,
                  give_back: GiveBack, queue: str) -> list[Message]:
    """``claim`` (a receive that does not wait) at once, or, with ``wait``, again each
    time the queue's waiter wakes this poll, until it gets messages or ``wait`` seconds
    pass. Nothing is claimed for a client that left, and what was claimed as it left is
    given back."""
    polls = polls_of(request)
    if wait <= 0:
        if await request.is_disconnected():
            return []
        async with polls.quick:  # the claim and its hand-over (or give-back)
            return await _handed(request, await claim(), give_back) or []
    deadline = time.monotonic() + wait
    left = asyncio.ensure_future(_client_leaves(request))
    try:
        with polls.waiting(queue) as waiter:
            return await _poll(request, polls, waiter, left, deadline, claim, give_back)
    finally:
        left.cancel()


async def _poll(request: Request, polls: Polls, waiter: Waiter, left: asyncio.Future[None],
                deadline: float, claim: Claim, give_back: GiveBack) -> list[Message]:
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


async def _claim(request: Request, polls: Polls, waiter: Waiter, claim: Claim,
                 give_back: GiveBack) -> list[Message] | None:
    """One claim of a poll: None if its client left, else what it got."""
    async with polls.claim_slots:
        if await request.is_disconnected():
            return None
        async with polls.claims:  # the claim and its hand-over (or give-back)
            got = await claim()
            if got:
                waiter.claimed = True
            return await _handed(request, got, give_back)


async def _handed(request: Request, got: list[Message],
                  give_back: GiveBack) -> list[Message] | None:
    """``got``, or None once given back because the client left while it was claimed."""
    if got and await request.is_disconnected():
        for message in got:
            try:
                await give_back(message)
            except Exception as exc:  # its lease was lost meanwhile: nothing to give back
                log.info("could not give back message %s: %s", message.id, exc)
        return None
    return got
