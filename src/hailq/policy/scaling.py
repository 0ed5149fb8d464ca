"""How many worker processes a queue wants (rule 25's ``desired_workers``), a pure
function of figures any process can read.

Little's law sizes the steady state: handler slots busy = arrival rate x handler
time. On top, the ready backlog should drain within the horizon (the tightest
service level of the queue, else a minute), and a backlog older than the loosest
target asks for one worker more than run now. Never below the slots in flight,
never above what ``max_in_flight`` lets work, nor what a rate limit keeps busy
(rule 33: ``rate x handler time`` slots; a rate-limited queue is not a saturated one,
and more workers there would only wait for tokens), nor a saturation point measured
by ``hailq autoscale``, and at least one whenever work is ready: an autoscaler such
as KEDA scales from zero on it. PostgreSQL's ``desired_workers`` view (migration 4)
computes the same.

A queue in deadline order (rule 41) is sized by ``deadline_workers`` instead: the
smallest pool with which deadline order starts every message by its deadline
(``policy/pool.py`` simulates it over the backlog and the arrivals to come), or, where
no pool can, the largest useful one and why. The view does not simulate: it gives
the pool the maintenance duty ``deadline_pools`` (``hailq/runtime/maintenance.py``)
stored in the last minute from ``Queue.figures()``, and the figure above until one is
stored (migration 16).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hailq.policy.deadlines import targets_of
from hailq.policy.pool import Need, PoolAnswer, Waiting, smallest_pool

DEFAULT_HORIZON = 60.0  # seconds a backlog may take to drain where no target says


@dataclass(frozen=True)
class Demand:
    """What one queue asks of its workers now."""

    ready: int  # receivable now
    in_flight: int  # leased
    oldest_ready_age: float | None  # seconds the oldest ready message has waited
    arrival_rate: float | None  # messages sent per second lately (None: not measured)
    handler_time: float | None  # seconds per message lately (None: not measured)
    workers: int = 0  # worker processes consuming the queue now
    concurrency: int = 1  # handler slots per worker process
    slo: tuple[float, ...] = ()  # the queue's service-level targets, in seconds
    max_in_flight: int | None = None
    ceiling: int | None = None  # a saturation point measured by an autoscaler
    rate: float | None = None  # the queue's rate limit, messages per second


def desired_workers(d: Demand) -> int:
    """Worker processes (of ``d.concurrency`` slots each) the queue wants."""
    per_worker = max(d.concurrency, 1)
    horizon = min(d.slo) if d.slo else DEFAULT_HORIZON
    if d.handler_time is None:  # nothing measured yet: keep those working, one if idle
        slots = float(d.in_flight)
        wanted = math.ceil(slots / per_worker)
        if d.ready:
            wanted = max(wanted, d.workers, 1)
    else:
        slots = (d.arrival_rate or 0.0) * d.handler_time + d.ready * d.handler_time / horizon
        slots = max(slots, float(d.in_flight))
        wanted = math.ceil(slots / per_worker - 1e-9)
        if d.ready:
            wanted = max(wanted, 1)
    loosest = max(d.slo) if d.slo else DEFAULT_HORIZON
    if d.ready and d.oldest_ready_age is not None and d.oldest_ready_age > loosest:
        wanted = max(wanted, d.workers + 1)  # already late: more than there are now
    if d.max_in_flight is not None:  # more workers than the cap lets work only idle
        wanted = min(wanted, max(math.ceil(d.max_in_flight / per_worker), 1))
    if d.rate is not None and d.handler_time is not None:  # the limit keeps so many busy
        wanted = min(wanted, max(math.ceil(d.rate * d.handler_time / per_worker - 1e-9), 1))
    if d.ceiling is not None:
        wanted = min(wanted, max(d.ceiling, 1))
    return max(wanted, 0)


READY_READ = 1000  # ready messages read in delivery order to size a deadline queue
ARRIVALS_PLAYED = 1000  # arrivals simulated at most: bounds the horizon at high rates


@dataclass(frozen=True)
class Backlog:
    """What a queue in deadline order holds, read in a bounded way: the first ready
    messages in delivery order (priority, available_at, ordering key), and the arrival
    rate of each priority in messages a second, as the sends recorded it (each send
    counts its messages per priority and 10-second slot, migrations 12 and 10)."""

    now: float
    slo: Mapping[int, float]
    first: Sequence[tuple[int, float, str | None]]
    arrivals: Mapping[int, float]


def deadline_workers(d: Demand, b: Backlog) -> PoolAnswer:
    """Worker processes a queue in deadline order wants: the smallest pool that meets
    every target, else the largest useful one with the reason. The ``first`` ready
    messages read are simulated with the arrivals; those past them are due no earlier
    than the last one read, so the pool must at least start every ready message by that
    deadline (the simulation's cost stays bounded however long the backlog). Leased
    messages are taken to end half a handler time from now. Capped by ``max_in_flight``,
    a rate limit and a saturation point as ``desired_workers`` is; before a handler time
    is measured, ``desired_workers``' figure."""
    if d.handler_time is None or d.handler_time <= 0.0 or not b.slo:
        return PoolAnswer(desired_workers(d), 0, True)
    per = max(d.concurrency, 1)
    groups: dict[tuple[int, float, str | None], int] = {}
    for priority, at, key in b.first:
        cell = (priority, round(at, 1), key)
        groups[cell] = groups.get(cell, 0) + 1
    ready = [Waiting(p, at, n, key) for (p, at, key), n in groups.items()]
    total = sum(b.arrivals.values())
    horizon = 2.0 * max(b.slo.values())
    if total > 0.0:
        horizon = min(horizon, ARRIVALS_PLAYED / total)
    answer = smallest_pool(Need(
        now=b.now, slo=b.slo, handler_time=d.handler_time, ready=ready,
        in_flight_ends=[b.now + d.handler_time / 2.0] * d.in_flight,
        arrival_rates=dict(b.arrivals), concurrency=per, max_in_flight=d.max_in_flight,
        rate=d.rate, horizon=horizon))
    slots, met, reason = answer.slots, answer.met, answer.reason
    rest = d.ready - len(b.first)
    if rest > 0 and b.first and met:
        # Those not read are due no earlier than the last one read: every ready message
        # must have started by then, beside the slots the arrivals keep busy.
        last_p, last_at, _ = b.first[-1]
        window = last_at + targets_of(b.slo)[last_p] - b.now + d.handler_time
        slots = max(slots, math.ceil(d.ready * d.handler_time / max(window, d.handler_time)
                                     + total * d.handler_time - 1e-9))
        if d.max_in_flight is not None and slots > d.max_in_flight:
            slots, met = d.max_in_flight, False
            reason = (f"max_in_flight: at most {d.max_in_flight} in flight, and the "
                      "targets need more")
    workers = math.ceil(slots / per)
    if d.ready:
        workers = max(workers, 1)
    if d.ceiling is not None:  # more workers than a saturated downstream takes only wait
        workers = min(workers, max(d.ceiling, 1))
    return PoolAnswer(workers, slots, met, reason)
