"""The smallest pool that meets every target (SPEC rule 41), a pure function.

For a queue in deadline order, ``smallest_pool`` finds the fewest handler slots with
which deadline order starts every message by its deadline (``available_at`` plus its
priority's target: a wait within the target, as rule 25 counts breaches). It plays
the deadline schedule (``policy/simulation.py``) over what the queue holds now — the
ready messages, the leased ones until their handlers are expected to end — and over
the arrivals the measured rates per priority bring during a horizon (twice the
loosest target), and searches the slot count. It never answers fewer slots than the
arrivals keep busy (rate × handler time), so a steady overload that a finite horizon
would hide still counts.

Where no pool can meet every target it says why and names the largest useful pool:
the size past which more slots leave as many breaches.

- ``late``: a ready message is already past its deadline;
- ``key chain``: a key's messages, one at a time, cannot all start in time;
- ``max_in_flight``: the cap leaves fewer slots working than the targets need;
- ``rate limit``: the limit starts messages more slowly than the targets need.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from hailq.policy.deadlines import targets_of
from hailq.policy.simulation import Job, Order, simulate

DEADLINE = Order("deadline")


@dataclass(frozen=True)
class Waiting:
    """``count`` ready messages of one priority, receivable since ``available_at``,
    with ordering key ``key`` (None: none)."""

    priority: int
    available_at: float
    count: int = 1
    key: str | None = None


@dataclass(frozen=True)
class Need:
    """What one queue holds and receives, on the broker's clock (``now``)."""

    now: float
    slo: Mapping[int, float]
    handler_time: float  # seconds a handler runs, measured
    ready: Sequence[Waiting] = ()
    in_flight_ends: Sequence[float] = ()  # when each leased message's handler should end
    arrival_rates: Mapping[int, float] | None = None  # messages a second per priority
    concurrency: int = 1  # handler slots per worker process
    max_in_flight: int | None = None
    rate: float | None = None  # the queue's rate limit, messages a second
    horizon: float | None = None  # seconds of arrivals played; None: twice the loosest target


@dataclass(frozen=True)
class PoolAnswer:
    """``workers`` processes (``slots`` handler slots) meet every target; where none
    can, ``workers`` is the largest useful pool and ``reason`` says why no pool can."""

    workers: int
    slots: int
    met: bool
    reason: str | None = None


def smallest_pool(need: Need) -> PoolAnswer:
    """The fewest workers with which deadline order meets every target of ``need``."""
    if need.handler_time <= 0.0 or not need.slo:
        raise ValueError("a pool is sized from a measured handler time and targets")
    jobs = _jobs(need)
    per = max(need.concurrency, 1)
    if not jobs and not need.in_flight_ends:
        return PoolAnswer(0, 0, True)
    steady = sum((need.arrival_rates or {}).values()) * need.handler_time
    floor = max(math.ceil(steady - 1e-9), 1)
    everything = max(len(jobs) + len(need.in_flight_ends), floor)

    def breaches(slots: int, *, capped: bool = True) -> int:
        rate = need.rate if capped else None
        return simulate(jobs, slots, DEADLINE, need.slo, busy_until=need.in_flight_ends,
                        rate=rate, start=need.now).breaches

    least = breaches(everything, capped=False)  # as many slots as messages: no queueing
    if least == 0 and breaches(everything) == 0:
        slots = _first(floor, everything, lambda n: breaches(n) == 0)
        cap = need.max_in_flight
        if cap is None or slots <= cap:
            return PoolAnswer(math.ceil(slots / per), slots, True)
        return _useful(min(cap, everything), per, "max_in_flight: at most "
                       f"{cap} in flight, and the targets need {slots}")
    reason = _why(need, jobs, least)
    top = min(everything, need.max_in_flight or everything)
    fewest = breaches(top)
    slots = _first(1, top, lambda n: breaches(n) <= fewest)
    return _useful(slots, per, reason)


def _useful(slots: int, per: int, reason: str) -> PoolAnswer:
    return PoolAnswer(math.ceil(slots / per), slots, False, reason)


def _why(need: Need, jobs: list[Job], least: int) -> str:
    targets = targets_of(need.slo)
    late = sum(1 for j in jobs if j.at + targets[j.priority] < need.now)
    if late:
        return f"late: {late} ready message(s) already past their deadline"
    if least:
        return "key chain: a key's messages, one at a time, cannot all start in time"
    return (f"rate limit: {need.rate:g}/s starts messages more slowly than the targets "
            "need")


def _first(lo: int, hi: int, ok: Callable[[int], bool]) -> int:
    """The smallest n in [lo, hi] with ok(n), ok(hi) being true (binary search: with
    equal handler times more slots never start a message later)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _jobs(need: Need) -> list[Job]:
    h, now = need.handler_time, need.now
    jobs = [Job(w.available_at, w.priority, h, w.key)
            for w in need.ready for _ in range(w.count)]
    horizon = 2.0 * max(need.slo.values()) if need.horizon is None else need.horizon
    for priority, rate in sorted((need.arrival_rates or {}).items()):
        if rate > 0.0:  # evenly spaced: the measured rate, no burst of its own
            step = 1.0 / rate
            jobs += [Job(now + (k + 1) * step, priority, h)
                     for k in range(int(horizon * rate))]
    return jobs
