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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
