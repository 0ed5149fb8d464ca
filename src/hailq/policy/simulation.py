"""A pool of workers serving a queue, simulated (SPEC rules 16, 25, 41): pure and seeded.

``simulate`` plays a list of messages through ``slots`` handler slots that never
pre-empt: whenever a slot is free it starts the ready message that the queue's order
puts first — strict priority, aging (``available_at - p * A``) or deadline order
(``available_at + T(p)``, ``policy/deadlines.py``) — as hailq's claim does. Messages
that share an ordering key run one at a time in arrival order (rule 17); a rate limit
spaces starts at least ``1 / rate`` apart (rule 33, without the burst). Waits are
counted as rule 25 counts them (available → handler start), a breach is a wait
longer than the priority's target.

It answers two questions: which order meets the targets for a given load and pool
(``docs/concepts/priorities.md`` shows a load where only deadline order does), and
how small a pool can be (``policy/pool.py``).
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from hailq.policy.deadlines import deadline, targets_of

OrderName = Literal["strict", "aging", "deadline"]


@dataclass(frozen=True)
class Job:
    """One message: when it became receivable, its priority, how long its handler
    runs, and its ordering key (None: none)."""

    at: float
    priority: int
    handler: float
    key: str | None = None


@dataclass(frozen=True)
class Order:
    """A queue's delivery order: ``strict``, ``aging`` by ``aging`` seconds a level,
    or ``deadline`` (needs targets)."""

    name: OrderName = "strict"
    aging: float = 0.0

    def key(self, job: Job, targets: tuple[float, ...] | None) -> float:
        if self.name == "strict":
            return float(-job.priority)
        if self.name == "aging":
            return job.at - job.priority * self.aging
        if targets is None:
            raise ValueError("deadline order needs service-level targets")
        return deadline(job.priority, job.at, targets)


@dataclass(frozen=True)
class ClassResult:
    """What one priority saw: messages, breaches of its target, waits (nearest-rank
    p99 and the largest)."""

    priority: int
    target: float | None
    messages: int
    breaches: int
    p99_wait: float
    max_wait: float


@dataclass(frozen=True)
class Result:
    """A simulated run: per priority, highest first, and when the last handler ended."""

    classes: tuple[ClassResult, ...]
    makespan: float

    @property
    def breaches(self) -> int:
        return sum(c.breaches for c in self.classes)


def simulate(jobs: Sequence[Job], slots: int, order: Order,
             slo: Mapping[int, float] | None = None, *, busy_until: Iterable[float] = (),
             rate: float | None = None, start: float = 0.0) -> Result:
    """Play ``jobs`` through ``slots`` handler slots from ``start``; ``busy_until``: slots
    already running a message until then (those count towards ``slots``)."""
    if slots < 1:
        raise ValueError("a pool needs at least one slot")
    targets = targets_of(slo) if slo else None
    gap = 1.0 / rate if rate else 0.0
    free = sorted(busy_until)[:slots]
    free += [start] * (slots - len(free))
    heapq.heapify(free)
    # Per key, messages wait behind the one before them: only a key's head is eligible.
    chains: dict[str, deque[int]] = {}
    pending: list[tuple[float, int]] = []  # (eligible at, index)
    for i in sorted(range(len(jobs)), key=lambda i: jobs[i].at):
        job = jobs[i]
        if job.key is None:
            pending.append((job.at, i))
        else:
            chain = chains.setdefault(job.key, deque())
            if not chain:
                pending.append((job.at, i))
            chain.append(i)
    heapq.heapify(pending)
    ready: list[tuple[float, int]] = []  # (order key, index: ties in arrival order)
    waits: list[float] = [0.0] * len(jobs)
    last_start, makespan, done = -math.inf, start, 0
    while done < len(jobs):
        t = heapq.heappop(free)
        if not ready and pending:
            t = max(t, pending[0][0])
        t = max(t, last_start + gap)
        while pending and pending[0][0] <= t:
            _, i = heapq.heappop(pending)
            heapq.heappush(ready, (order.key(jobs[i], targets), i))
        if not ready:  # a key's next message is due later than this slot frees
            heapq.heappush(free, t if not pending else max(t, pending[0][0]))
            continue
        _, i = heapq.heappop(ready)
        job = jobs[i]
        waits[i] = max(t - job.at, 0.0)
        end = t + job.handler
        last_start, makespan, done = t, max(makespan, end), done + 1
        heapq.heappush(free, end)
        if job.key is not None:
            chain = chains[job.key]
            chain.popleft()
            if chain:  # the key's next message may start once this one has ended
                heapq.heappush(pending, (max(end, jobs[chain[0]].at), chain[0]))
    return Result(_classes(jobs, waits, targets), makespan)


def _classes(jobs: Sequence[Job], waits: list[float],
             targets: tuple[float, ...] | None) -> tuple[ClassResult, ...]:
    by: dict[int, list[float]] = {}
    for job, wait in zip(jobs, waits, strict=True):
        by.setdefault(job.priority, []).append(wait)
    out = []
    for p in sorted(by, reverse=True):
        w = sorted(by[p])
        target = targets[p] if targets else None
        out.append(ClassResult(
            p, target, len(w), sum(x > target + 1e-9 for x in w) if target is not None else 0,
            w[max(math.ceil(0.99 * len(w)) - 1, 0)], w[-1]))
    return tuple(out)


@dataclass(frozen=True)
class Stream:
    """Messages of one priority arriving at ``rate`` a second from ``begin`` to ``end``."""

    priority: int
    rate: float
    begin: float
    end: float


def arrivals(streams: Iterable[Stream], handler: float, seed: int) -> list[Job]:
    """Poisson arrivals of every stream, seeded, each with a ``handler``-second run."""
    rng = random.Random(seed)
    jobs = []
    for s in streams:
        t = s.begin + rng.expovariate(s.rate)
        while t < s.end:
            jobs.append(Job(t, s.priority, handler))
            t += rng.expovariate(s.rate)
    jobs.sort(key=lambda j: j.at)
    return jobs


# The load of docs/concepts/priorities.md: steady normal and bulk work, then a wave of
# urgent messages that the pool can only absorb by letting each class wait up to its
# target.
SLO_SCENARIO: dict[int, float] = {9: 60.0, 5: 120.0, 0: 600.0}
SCENARIO_STREAMS = (Stream(0, 4.0, 0.0, 900.0), Stream(5, 6.0, 0.0, 900.0),
                    Stream(9, 14.0, 300.0, 500.0))
SCENARIO_HANDLER = 3.0


def scenario(seed: int = 1) -> list[Job]:
    """The published load, seeded."""
    return arrivals(SCENARIO_STREAMS, SCENARIO_HANDLER, seed)
