"""Producers that share commits: group commit for sends of one process (SPEC rule 2).

A send alone (no other send of this broker in flight) runs on its caller's thread as
before, and is no slower. Sends that overlap, from many threads (or from coroutines
through ``submit``), are handed to one committer thread, which sends all those that
arrived while it was busy in one transaction and one commit:

- each caller returns only once its own messages are durable (its future is done
  after the commit that stored them);
- a dedup id still dedups: the group is sent in arrival order, so a later message of
  a dedup id finds the earlier one's record, in the same transaction or before;
- a failure reaches exactly the callers it concerns: when the database is down or a
  commit's outcome is unknown, every caller of that group is told (each of them may
  be concerned), and so are the sends waiting for the next commit (with a
  StorageError that says nothing of theirs was stored), so that none waits past its
  deadline (rule 31) behind a second failing commit; sends then go alone until one
  succeeds. When the group failed for one caller's messages (a deleted queue), each
  caller's messages are sent again alone, so only that caller sees the error.

A group waits for the sends in flight that have not reached it yet (the callers of
the last commit, back with their next sends), a quarter of the last commit at most:
taken at once, the first of them would go alone and the rest in the commit after.

What a commit costs each of its messages is the committer's to keep small: a waiting
thread sleeps on a lock of its own (no future, no condition per send); a coroutine
of hailq.aio's SQLite broker (``on_loop``) awaits an asyncio future of its loop, and
all of a commit's futures of one loop are settled in one callback of that loop (not
a wake-up of the loop per message). ``submit`` returns a
``concurrent.futures.Future``, for callers of their own. hailq.aio's PostgreSQL
broker, whose calls run on its event loop, shares commits through
``hailq/aio/committer.py``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING

from hailq.backends.base import Backend, NewMessage, SendParams
from hailq.errors import OutcomeUnknown, StorageError

if TYPE_CHECKING:
    import asyncio

IDLE = 1.0  # seconds the committer thread waits for work before it ends
GROUP = 1000  # messages at most in one shared transaction (the largest send_many)
GATHER = 0.002  # seconds at most a group waits for the sends in flight to join it

Awaiting = tuple["asyncio.AbstractEventLoop",
                 Callable[["asyncio.Future[list[str]]"], list[str]]]


def _on_thread() -> Awaiting | None:
    return None


on_loop: Callable[[], Awaiting | None] = _on_thread
"""How a send waits for its shared commit: None, by blocking its thread; hailq.aio's
SQLite driver sets here what a send made inside its coroutines (in a greenlet on the
event loop, ``hailq/aio/drivers.py``) waits with: the running loop, on which its
future is made and settled, and how the send awaits that future."""


class _Entry(ABC):
    """One send handed to the committer: its messages, then their ids or the error that
    concerns them, which ``settle`` tells its caller."""

    __slots__ = ("error", "ids", "messages")
    loop: asyncio.AbstractEventLoop | None = None  # settled in a callback of this loop

    def __init__(self, messages: Sequence[NewMessage]) -> None:
        self.messages = messages
        self.ids: list[str] = []
        self.error: BaseException | None = None

    def live(self) -> bool:
        """Whether its messages are still to be sent (called once, as its group is
        taken): False for a caller that cancelled."""
        return True

    @abstractmethod
    def settle(self) -> None:
        """Tell the caller its ids or its error: each kind of caller is told its own way."""


class _Blocked(_Entry):
    """A thread's send: the thread sleeps on a lock of its own, released once."""

    __slots__ = ("_done",)

    def __init__(self, messages: Sequence[NewMessage]) -> None:
        super().__init__(messages)
        self._done = threading.Lock()
        self._done.acquire()

    def settle(self) -> None:
        self._done.release()

    def wait(self) -> list[str]:
        self._done.acquire()
        if self.error is not None:
            raise self.error
        return self.ids


class _Awaited(_Entry):
    """A coroutine's send: an asyncio future, settled on its loop (``loop``; None: the
    committer runs on that loop already)."""

    __slots__ = ("future", "loop")

    def __init__(self, messages: Sequence[NewMessage], future: asyncio.Future[list[str]],
                 loop: asyncio.AbstractEventLoop | None) -> None:
        super().__init__(messages)
        self.future = future
        self.loop = loop

    def live(self) -> bool:
        return not self.future.cancelled()  # a cancelled caller's messages are not sent

    def settle(self) -> None:
        if not self.future.done():
            if self.error is None:
                self.future.set_result(self.ids)
            else:
                self.future.set_exception(self.error)


class _Futured(_Entry):
    """A send of ``submit``: a ``concurrent.futures.Future``."""

    __slots__ = ("future",)

    def __init__(self, messages: Sequence[NewMessage]) -> None:
        super().__init__(messages)
        self.future: Future[list[str]] = Future()

    def live(self) -> bool:
        return self.future.set_running_or_notify_cancel()

    def settle(self) -> None:
        if self.error is None:
            self.future.set_result(self.ids)
        else:
            self.future.set_exception(self.error)


def _settle_all(entries: list[_Entry]) -> None:
    for e in entries:
        e.settle()


def tell(entries: Sequence[_Entry]) -> None:
    """Tell each caller of ``entries`` its outcome: a thread is woken, and the coroutines
    of one event loop all in one callback of that loop, not one wake-up of the loop (a
    write to its self-pipe) per message."""
    loops: dict[asyncio.AbstractEventLoop, list[_Entry]] = {}
    for e in entries:
        if e.loop is None:
            e.settle()
        else:
            loops.setdefault(e.loop, []).append(e)
    for loop, theirs in loops.items():
        with contextlib.suppress(RuntimeError):  # its loop is closed: nobody awaits them
            loop.call_soon_threadsafe(_settle_all, theirs)


class Committer:
    """The sends of one backend: alone on the caller's thread, together when they
    overlap."""

    def __init__(self, send: Callable[[Sequence[NewMessage]], list[str]]) -> None:
        self._send = send
        self._fresh()
        self._gather = 0.0  # seconds a group waits for the sends in flight (``_run``)
        self.groups = 0  # shared transactions committed (for tests and the bench)
        self.healthy = True  # False from a database failure until a send succeeds
        _EVERY.add(self)

    def _fresh(self) -> None:
        """No thread, nothing pending or in flight: at start, and in a forked child (the
        parent's thread, its sends and maybe its held lock are not there: rule 28)."""
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._pending: list[_Entry] = []
        self._in_flight: list[None] = []  # one per send between its start and its return
        self._thread: threading.Thread | None = None

    def send(self, messages: Sequence[NewMessage]) -> list[str]:
        """Send ``messages`` atomically; their ids once they are durable."""
        # One item per send in flight: list.append and list.pop are atomic, so the count
        # never drifts, and two sends that start together at worst both share.
        in_flight = self._in_flight
        in_flight.append(None)
        try:
            awaiting = on_loop()
            if awaiting is None:
                # Alone: nobody to share a commit with. In an outage each send waits for
                # the database on its own, within its own deadline (rule 31), until one
                # succeeds.
                if len(in_flight) == 1 or not self.healthy:
                    sent = self._send(messages)
                    self.healthy = True
                    return sent
                blocked = _Blocked(messages)
                self._enqueue(blocked)
                return blocked.wait()
            # A send of a coroutine never writes on its event loop's thread: it always
            # goes to the committer thread, and its coroutine awaits the commit.
            loop, wait = awaiting
            awaited = _Awaited(messages, loop.create_future(), loop)
            self._enqueue(awaited)
            return wait(awaited.future)
        finally:
            in_flight.pop()

    def submit(self, messages: Sequence[NewMessage]) -> Future[list[str]]:
        """Hand ``messages`` to the committer thread; a future of their ids, done once
        they are durable (or with the error that concerns them)."""
        entry = _Futured(messages)
        self._enqueue(entry)
        return entry.future

    def _enqueue(self, entry: _Entry) -> None:
        # Appended without the lock (list.append is atomic; the committer takes entries
        # off the front and never replaces the list while it runs): a sender does not
        # wait for a committer that holds the lock while it waits for the interpreter.
        pending = self._pending
        first = not pending  # (checked before: two senders may append between)
        pending.append(entry)
        if first or len(pending) >= len(self._in_flight) or self._thread is None:
            # The committer waits for its first send, or for the last of those in flight
            # (``_run``): each other send would only wake it to wait again.
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, daemon=True,
                                                    name="hailq-committer")
                    self._thread.start()
                else:
                    self._work.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self._work.wait(IDLE)
                    if not self._pending:
                        # Gone, and then a last look: a send appended before it saw
                        # None, with none to start a thread, and is taken here.
                        self._thread = None
                        if not self._pending:
                            return
                        self._thread = threading.current_thread()
                # The callers of the last commit are back with their next sends a moment
                # after it: taking at once the first one to submit would commit it alone,
                # and the rest in the commit after, every other commit nearly empty. So
                # the sends in flight are waited for, a quarter of a commit at most.
                gather = time.monotonic() + self._gather
                while len(self._pending) < len(self._in_flight):
                    left = gather - time.monotonic()
                    if left <= 0:
                        break
                    self._work.wait(left)
                group = take_group(self._pending)
            began = time.monotonic()
            self._commit([e for e in group if e.live()])
            self._gather = min((time.monotonic() - began) / 4, GATHER)

    def _commit(self, group: list[_Entry]) -> None:
        if not group:
            return
        try:
            ids = self._send([m for e in group for m in e.messages] if len(group) > 1
                             else group[0].messages)
        except (StorageError, OutcomeUnknown) as exc:  # the database's: every caller's
            self._outage(group, exc)
            return
        except Exception as exc:
            if len(group) == 1:
                group[0].error = exc
                tell(group)
            else:  # one caller's messages: each sent again on its own
                for e in group:
                    self._commit([e])
            return
        self.healthy = True
        self.groups += len(group) > 1
        at = 0
        for e in group:
            n = len(e.messages)
            e.ids = ids[at:at + n]
            at += n
        tell(group)

    def _outage(self, group: list[_Entry], exc: BaseException) -> None:
        """The database failed a commit: its callers get the error, and so do the sends
        that waited to share the next one (stored nowhere), rather than wait for another
        failing commit past their deadline; until a send succeeds, sends go alone."""
        self.healthy = False
        for e in group:
            e.error = exc
        with self._lock:  # in place: a sender may be appending to this very list
            waiting = self._pending[:]
            del self._pending[:len(waiting)]
        told = [e for e in waiting if e.live()]
        for e in told:
            e.error = StorageError(
                f"not sent, nothing was stored: the database failed the commit this "
                f"send waited to share ({exc})")
        tell([*group, *told])


_EVERY: weakref.WeakSet[Committer] = weakref.WeakSet()


def _after_fork() -> None:
    for committer in list(_EVERY):
        committer._fresh()


os.register_at_fork(after_in_child=_after_fork)

_COMMITTERS: weakref.WeakKeyDictionary[Backend, Committer] = weakref.WeakKeyDictionary()
_MADE = threading.Lock()


def committer_for(backend: Backend) -> Committer:
    """The committer of ``backend``: one per broker, shared by its queues."""
    found = _COMMITTERS.get(backend)
    if found is None:
        with _MADE:
            found = _COMMITTERS.get(backend)
            if found is None:
                ref = weakref.ref(backend)

                def send(messages: Sequence[NewMessage]) -> list[str]:
                    owner = ref()
                    if owner is None:
                        raise StorageError("the broker of this send was closed and freed")
                    return owner.message_send(SendParams(messages))

                # A dialect driven on an event loop (hailq.aio's PostgreSQL one) brings
                # a committer whose sends wait by awaiting, not by blocking a thread.
                make = getattr(getattr(backend, "dialect", None), "make_committer", None)
                found = _COMMITTERS[backend] = Committer(send) if make is None else make(send)
    return found


def take_group(pending: list[_Entry]) -> list[_Entry]:
    """The next group of ``pending`` (taken out of it): its first entry, then as many
    following ones as fit in ``GROUP`` messages."""
    size = taken = 0
    for e in pending:
        size += len(e.messages)
        if taken and size > GROUP:
            break
        taken += 1
    group = pending[:taken]
    del pending[:taken]
    return group
