"""The image checkers: the check itself, what they observe, and the one slower than its lease.

The 50 well-behaved checkers are the slots of one ``hailq.runtime.Worker``:
the runtime receives only for free slots, renews leases while a check runs,
and coalesces the acks. The slow checker is an old-style consumer without
lease renewal, so its lease ends while it still works on its claim.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import hailq
from hailq.demo.results import ResultStore
from hailq.demo.story import MAX_ATTEMPTS


class CorruptPhoto(Exception):
    """The image library cannot decode a photo: every check of this claim fails."""


@dataclass
class Tracker:
    """What the demo observes while it runs; every method is thread-safe."""

    started_at: dict[int, float] = field(default_factory=dict)  # first start per claim
    results: int = 0
    last_result: float = 0.0
    redelivered: dict[int, int] = field(default_factory=dict)  # claim -> highest attempt
    late_acks_rejected: int = 0
    late_acks_accepted: int = 0
    busy: int = 0
    events: collections.deque[tuple[float, str]] = field(
        default_factory=lambda: collections.deque(maxlen=200))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, claim: int, attempt: int) -> None:
        now = time.monotonic()
        with self._lock:
            self.busy += 1
            self.started_at.setdefault(claim, now)
            if attempt > 1:
                self.redelivered[claim] = max(attempt, self.redelivered.get(claim, 0))

    def finish(self, fresh: bool) -> None:
        now = time.monotonic()
        with self._lock:
            self.busy -= 1
            if fresh:
                self.results += 1
                self.last_result = max(self.last_result, now)

    def event(self, text: str) -> None:
        with self._lock:
            self.events.append((time.monotonic(), text))

    def late_ack(self, accepted: bool) -> None:
        with self._lock:
            if accepted:
                self.late_acks_accepted += 1
            else:
                self.late_acks_rejected += 1


def verdict_of(claim: dict[str, object]) -> str:
    """A made-up but stable verdict for a claim."""
    number = int(claim["claim"])  # type: ignore[call-overload]
    return "hail damage confirmed" if number % 7 else "assessor visit needed"


def make_check(store: ResultStore, tracker: Tracker) -> Callable[[hailq.Message], None]:
    """The handler of the checkers' queue: check the photos, store the verdict."""

    def check_claim(message: hailq.Message) -> None:
        claim = message.body
        assert isinstance(claim, dict)
        number = int(claim["claim"])
        tracker.start(number, message.attempt)
        fresh = False
        try:
            if message.attempt > 1 and not claim["corrupt"]:
                tracker.event(f"claim {number} is back (attempt {message.attempt}) "
                              "and checked again")
            time.sleep(float(claim["check_ms"]) / 1000)  # the image check
            if claim["corrupt"]:
                last = message.attempt >= MAX_ATTEMPTS
                tracker.event(f"claim {number}: corrupt photo, attempt {message.attempt}/"
                              f"{MAX_ATTEMPTS}" + (" -> dead-letter queue" if last else ""))
                raise CorruptPhoto(f"claim {number}: photo 3 of {claim['photos']} cannot be "
                                   "decoded (truncated JPEG)")
            fresh = store.save(message, verdict_of(claim), threading.current_thread().name)
            if not fresh:
                tracker.event(f"claim {number} was already checked: the inbox skipped it")
        finally:
            tracker.finish(fresh)

    return check_claim


def slow_checker(queue: hailq.Queue, store: ResultStore, tracker: Tracker,
                 slowness: float = 1.5) -> threading.Thread:
    """Start an old checker without lease renewal that needs ``slowness`` x the lease.

    Its lease ends mid-check; a regular checker receives the claim and finishes
    it; the old checker's result is skipped by the inbox and its ack is
    rejected with ``LeaseLost``.
    """

    def run() -> None:
        messages = queue.receive(wait=10)
        if not messages:
            return
        [message] = messages
        claim = message.body
        assert isinstance(claim, dict)
        number = int(claim["claim"])
        tracker.event(f"slow checker took claim {number}; it needs {slowness:g}x its lease")
        time.sleep(queue.settings.lease * slowness)
        store.save(message, verdict_of(claim), "slow-checker")
        try:
            message.ack()
        except hailq.LeaseLost:
            tracker.late_ack(accepted=False)
            tracker.event(f"slow checker's ack of claim {number} rejected: LeaseLost "
                          "(another checker received it meanwhile)")
        else:
            tracker.late_ack(accepted=True)
            tracker.event(f"slow checker's ack of claim {number} came late but counted")

    thread = threading.Thread(target=run, name="slow-checker", daemon=True)
    thread.start()
    return thread
