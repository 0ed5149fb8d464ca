"""The image checkers: the check itself, what they observe, and the two odd checkers.

Of the ``--checkers`` image checkers, all but two are the slots of one
``hailq.runtime.Worker``: the runtime receives only for free slots, renews
leases while a check runs, and coalesces the acks. The other two are
``LoneChecker`` loops, old-style consumers that take one claim at a time with
plain receive and ack and never renew a lease: the checker process that
crashes mid-claim (``hailq.demo.roles``) and the ``SlowChecker``, which is
slower than its lease on one claim. Both check claims like everyone else
before and after their mishap, so the demo has exactly ``--checkers`` at work.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import hailq
from hailq.demo.results import ResultStore
from hailq.demo.story import MAX_ATTEMPTS


class CorruptPhoto(Exception):
    """The image library cannot decode a photo: every check of this claim fails."""


class Observer(Protocol):
    """Where a checker tells what it does: the ``Tracker``, or JSON lines from a process."""

    def start(self, claim: int, attempt: int) -> None: ...

    def finish(self, fresh: bool) -> None: ...

    def event(self, text: str) -> None: ...


@dataclass
class Tracker:
    """What the demo observes while it runs; every method is thread-safe.

    ``at`` (a ``time.monotonic()`` reading, the same clock in every process of
    the machine) is given for what a checker process reported; else it is now.
    """

    started_at: dict[int, float] = field(default_factory=dict)  # first start per claim
    results: int = 0
    last_result: float = 0.0
    redelivered: dict[int, int] = field(default_factory=dict)  # claim -> highest attempt
    late_acks_rejected: int = 0
    late_acks_accepted: int = 0
    busy: int = 0
    events: collections.deque[tuple[float, str]] = field(
        default_factory=lambda: collections.deque(maxlen=200))
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def start(self, claim: int, attempt: int, at: float | None = None) -> None:
        now = time.monotonic() if at is None else at
        with self._changed:
            self.busy += 1
            self.started_at.setdefault(claim, now)
            if attempt > 1:
                self.redelivered[claim] = max(attempt, self.redelivered.get(claim, 0))
                self._changed.notify_all()

    def finish(self, fresh: bool, at: float | None = None) -> None:
        now = time.monotonic() if at is None else at
        with self._changed:
            self.busy -= 1
            if fresh:
                self.results += 1
                self.last_result = max(self.last_result, now)

    def abandon(self) -> None:
        """A checker died mid-check: it is no longer busy, and it finished nothing."""
        with self._changed:
            self.busy -= 1

    def event(self, text: str) -> None:
        with self._changed:
            self.events.append((time.monotonic(), text))

    def late_ack(self, accepted: bool) -> None:
        with self._changed:
            if accepted:
                self.late_acks_accepted += 1
            else:
                self.late_acks_rejected += 1

    def wait_received_again(self, claim: int, attempt: int, timeout: float,
                            stop: threading.Event | None = None) -> bool:
        """Wait until a checker starts ``claim`` on a later attempt than ``attempt``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self.redelivered.get(claim, 0) <= attempt:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (stop is not None and stop.is_set()):
                    return False
                self._changed.wait(min(remaining, 0.1))
            return True


def verdict_of(claim: dict[str, object]) -> str:
    """A made-up but stable verdict for a claim."""
    number = int(claim["claim"])  # type: ignore[call-overload]
    return "hail damage confirmed" if number % 7 else "assessor visit needed"


def make_check(store: ResultStore, observer: Observer) -> Callable[[hailq.Message], None]:
    """The handler of the checkers' queue: check the photos, store the verdict."""

    def check_claim(message: hailq.Message) -> None:
        claim = message.body
        assert isinstance(claim, dict)
        number = int(claim["claim"])
        observer.start(number, message.attempt)
        fresh = False
        try:
            if message.attempt > 1 and not claim["corrupt"]:
                observer.event(f"claim {number} is back (attempt {message.attempt}) "
                               "and checked again")
            time.sleep(float(claim["check_ms"]) / 1000)  # the image check
            if claim["corrupt"]:
                last = message.attempt >= MAX_ATTEMPTS
                observer.event(f"claim {number}: corrupt photo, attempt {message.attempt}/"
                               f"{MAX_ATTEMPTS}" + (" -> dead-letter queue" if last else ""))
                raise CorruptPhoto(f"claim {number}: photo 3 of {claim['photos']} cannot be "
                                   "decoded (truncated JPEG)")
            fresh = store.save(message, verdict_of(claim), threading.current_thread().name)
            if not fresh:
                observer.event(f"claim {number} was already checked: the inbox skipped it")
        finally:
            observer.finish(fresh)

    return check_claim


Mishap = Callable[[hailq.Message], bool]  # handles the claim its own way; True if it did


class LoneChecker:
    """A checker outside the worker: one claim at a time, plain receive and ack, no renewal.

    ``check`` is the handler the worker's slots run; a claim whose check
    raises is given back with the queue's retry backoff, as the worker would.
    Before each claim, ``mishap`` may take the claim over instead.
    """

    def __init__(self, queue: hailq.Queue, check: Callable[[hailq.Message], None],
                 mishap: Mishap | None = None, poll: float = 0.5) -> None:
        self.queue = queue
        self.check = check
        self.mishap = mishap
        self.poll = poll

    def run(self, stop: threading.Event) -> None:
        """Check claims until ``stop`` is set; the last check is acked before returning."""
        finished: list[hailq.Message] = []
        try:
            while not stop.is_set():
                # The ack of the last claim and the receive of the next: one transaction.
                _, messages = self.queue.ack_and_receive(finished, 1)
                finished = []
                if not messages:
                    messages = self.queue.receive(wait=self.poll)
                for message in messages:
                    if self.mishap is not None and self.mishap(message):
                        continue
                    try:
                        self.check(message)
                    except Exception as exc:  # the check failed: retry later, as a worker would
                        _give_back(message, exc)
                    else:
                        finished.append(message)
        finally:
            if finished:
                self.queue.ack_many(finished)


def _give_back(message: hailq.Message, error: Exception) -> None:
    with contextlib.suppress(hailq.HailqError):  # if it fails, the claim returns after the lease
        message.nack(error=f"{type(error).__name__}: {error}")


class SlowChecker:
    """The checker slower than its lease, in a thread of its own.

    It checks claims like the others until ``take_next`` is set; then the next
    claim (not the corrupt one: that mishap is another story) takes it
    ``slowness`` times its lease, and does not end before another checker has
    received the claim again. Only then does it store its result (the inbox
    skips it if the other checker was first) and ack: the ack is rejected with
    ``LeaseLost``. Without that wait the ack could come after the lease but
    before anybody received the claim again, and hailq would accept it as late.
    """

    name = "slow-checker"

    def __init__(self, queue: hailq.Queue, store: ResultStore, tracker: Tracker,
                 slowness: float = 1.5) -> None:
        self.queue = queue
        self.store = store
        self.tracker = tracker
        self.slowness = slowness
        self.take_next = threading.Event()  # set by the run: be slow on the next claim
        self.claim: int | None = None  # the claim it is slow on, while it is
        self.done = threading.Event()  # its slow claim is over
        self.stop = threading.Event()
        self._checker = LoneChecker(queue, make_check(store, tracker), self._slow_claim)
        self._thread = threading.Thread(target=self._checker.run, args=(self.stop,),
                                        name=self.name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        self.stop.set()
        self._thread.join(timeout)

    @property
    def busy_with_slow_claim(self) -> bool:
        return self.claim is not None

    def _slow_claim(self, message: hailq.Message) -> bool:
        claim = message.body
        assert isinstance(claim, dict)
        if not self.take_next.is_set() or self.done.is_set() or claim["corrupt"]:
            return False
        number = int(claim["claim"])
        self.claim = number
        try:
            self._check_slowly(message, number)
        finally:
            self.claim = None
            self.done.set()
        return True

    def _check_slowly(self, message: hailq.Message, number: int) -> None:
        claim = message.body
        assert isinstance(claim, dict)
        lease = self.queue.settings.lease
        tracker = self.tracker
        tracker.start(number, message.attempt)
        tracker.event(f"slow checker took claim {number}; it needs {self.slowness:g}x "
                      "its lease")
        fresh = False
        try:
            time.sleep(lease * self.slowness)
            if not tracker.wait_received_again(number, message.attempt, 20 * lease, self.stop):
                tracker.event(f"nobody received claim {number} again while the slow "
                              "checker worked on it")
            fresh = self.store.save(message, verdict_of(claim), self.name)
        finally:
            tracker.finish(fresh)
        try:
            message.ack()
        except hailq.LeaseLost:
            tracker.late_ack(accepted=False)
            tracker.event(f"slow checker's ack of claim {number} rejected: LeaseLost "
                          "(another checker received it meanwhile)")
        else:
            tracker.late_ack(accepted=True)
            tracker.event(f"slow checker's ack of claim {number} came late but was accepted")
