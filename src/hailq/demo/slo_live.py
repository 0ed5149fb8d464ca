"""One live run of the service-level scenario in scaled time (``hailq demo --slo``).

The scenario's messages (``hailq.policy.simulation.scenario``) are sent at their
arrival times divided by ``scale`` to a queue in the order under test; a ``Worker``
with ``slots`` handler slots (the pool: it fetches only for free slots, no prefetch)
runs each handler for its time divided by ``scale``. Each message's wait is what the
broker counts (rule 25): from when it became available to when it was received, on
the broker's clock. Waits are reported in story seconds (multiplied by ``scale``).
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import hailq
from hailq.policy.simulation import ClassResult, Job, Order
from hailq.runtime import Worker

LIVE_TIMEOUT = 600.0  # seconds a run may take past its last arrival before it gives up


@dataclass(frozen=True)
class LiveRun:
    """What one run saw, per priority (highest first), in story seconds. ``service``:
    the story seconds a slot spent per message while messages waited (slots x the time
    some message was ready and waiting / the messages begun then): the handler's time
    and what the pool adds to it (the ack, the fetch of the next message, a sleep that
    overshoots); ``complete``: every message was handled."""

    classes: tuple[ClassResult, ...]
    service: float | None
    complete: bool
    seconds: float  # how long the run took, wall clock

    @property
    def breaches(self) -> int:
        return sum(c.breaches for c in self.classes)


def run_live(broker: hailq.Broker, queue: str, jobs: Sequence[Job], slots: int,
             order: Order, slo: dict[int, float], scale: float,
             on_tick: Callable[[int, int], None] | None = None) -> LiveRun:
    """Play ``jobs`` live through a pool of ``slots`` on a new queue named ``queue``."""
    targets = {p: t / scale for p, t in slo.items()}
    if order.name == "deadline":
        q = broker.queue(queue, slo=targets, order="deadline", lease=600.0)
    elif order.name == "aging":
        q = broker.queue(queue, slo=targets, aging=order.aging / scale, lease=600.0)
    else:
        q = broker.queue(queue, slo=targets, lease=600.0)
    waits: list[float | None] = [None] * len(jobs)
    lock = threading.Lock()
    done = threading.Event()
    handled = [0]
    events: list[tuple[float, float]] = []  # (available, begun) per message, real seconds

    def handle(message: hailq.Message) -> None:
        begun = time.time()  # the broker's clock on SQLite; the same machine's elsewhere
        i = int(message.body)
        received = message.received_at if message.received_at is not None else begun
        time.sleep(jobs[i].handler / scale)
        with lock:
            if waits[i] is None:
                events.append((message.available_at, received))
                waits[i] = max(received - message.available_at, 0.0) * scale
                handled[0] += 1
                if handled[0] == len(jobs):
                    done.set()

    worker = Worker(broker, {queue: handle}, concurrency=slots, grace=5.0, poll=0.5,
                    scheduler=False, registry_interval=1.0)
    thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False},
                              name=f"slo-{queue}", daemon=True)
    thread.start()
    start = time.monotonic()
    try:
        _send(q, jobs, scale, start, on_tick, handled)
        last = jobs[-1].at / scale if jobs else 0.0
        while not done.wait(0.2):
            if on_tick is not None:
                on_tick(len(jobs), handled[0])
            if time.monotonic() - start > last + LIVE_TIMEOUT:
                break
        elapsed = time.monotonic() - start
    finally:
        worker.stop()
        thread.join(30)
    longest = max((j.handler for j in jobs), default=0.0) / scale
    service = _service(events, slots, longest)
    return LiveRun(_classes(jobs, waits, slo), None if service is None else service * scale,
                   handled[0] == len(jobs), elapsed)


def _send(q: hailq.Queue, jobs: Sequence[Job], scale: float, start: float,
          on_tick: Callable[[int, int], None] | None, handled: list[int]) -> None:
    """Send each message at its arrival time, scaled; those due together in one batch."""
    i, n = 0, len(jobs)
    ticked = start
    while i < n:
        now = time.monotonic() - start
        due = jobs[i].at / scale
        if due > now:
            time.sleep(min(due - now, 0.05))
            continue
        j = i
        while j < n and jobs[j].at / scale <= now:
            j += 1
        q.send_many([hailq.Envelope(k, priority=jobs[k].priority) for k in range(i, j)])
        i = j
        if on_tick is not None and time.monotonic() - ticked >= 0.2:
            ticked = time.monotonic()
            on_tick(i, handled[0])


def _service(events: Sequence[tuple[float, float]], slots: int,
             least: float) -> float | None:
    """Seconds a slot spends per message while messages wait: over the times when some
    message waited longer than ``least`` (the longest handler: a shorter wait may be a
    receive's own latency while slots idle), every slot works or hands over, so it is
    slots x that time / the messages begun in it (short waiters included: deadline
    order starts a fresh message before an old one due later). None: none waited."""
    points = sorted([(a, 1) for a, b in events if b - a > least]
                    + [(b, -1) for a, b in events if b - a > least])
    spans: list[tuple[float, float]] = []
    waiting, since = 0, 0.0
    for at, step in points:
        if waiting == 0:
            since = at
        waiting += step
        if waiting == 0:
            spans.append((since, at))
    total = sum(b - a for a, b in spans)
    starts = sorted(b for _, b in events)
    begun = sum(bisect.bisect_right(starts, b) - bisect.bisect_left(starts, a)
                for a, b in spans)
    return slots * total / begun if begun and total > 0 else None


def _classes(jobs: Sequence[Job], waits: Sequence[float | None],
             slo: dict[int, float]) -> tuple[ClassResult, ...]:
    """Per priority as the simulation reports it: breaches, nearest-rank p99, largest."""
    by: dict[int, list[float]] = {}
    for job, wait in zip(jobs, waits, strict=True):
        if wait is not None:
            by.setdefault(job.priority, []).append(wait)
    out = []
    for p in sorted(by, reverse=True):
        w = sorted(by[p])
        target = slo.get(p)
        out.append(ClassResult(
            p, target, len(w), sum(x > target for x in w) if target is not None else 0,
            w[max(math.ceil(0.99 * len(w)) - 1, 0)], w[-1]))
    return tuple(out)
