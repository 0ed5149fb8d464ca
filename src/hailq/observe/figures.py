"""What one queue reports (rule 25): its stats, rates over the last 1 and 5 minutes,
wait and handler time per priority with service levels, its workers and the
``desired_workers`` figure. Built from one snapshot of the stored figures."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hailq.backends.base import FigureRows
from hailq.models import AutoscalerInfo, QueueStats, WorkerInfo
from hailq.observe.histogram import Histogram, bounds_for
from hailq.policy.scaling import Demand, desired_workers
from hailq.settings import QueueSettings

WINDOWS = (60.0, 300.0)  # the rates' windows: 1 and 5 minutes
SLOT = 10.0  # seconds per stored slot (queries.sql: figures_rate_add)
ALIVE_FOR = 15.0  # a worker not heard of for this long is not counted
CEILING_FOR = 600.0  # an autoscaler's saturation point caps desired_workers this long


@dataclass(frozen=True)
class PriorityFigures:
    """Wait (available -> handler start) and handler time of one priority, and its
    service level: ``breaches`` waited longer than ``slo``, ``compliance`` is the
    share within it (exact: each target is a bucket bound)."""

    priority: int
    slo: float | None
    started: int  # handler runs measured since the queue was first measured
    wait_p50: float | None
    wait_p95: float | None
    wait_p99: float | None
    handler_p50: float | None
    handler_p95: float | None
    handler_p99: float | None
    breaches: int
    compliance: float | None
    started_per_second_1m: float
    breaches_5m: int


@dataclass(frozen=True)
class Rates:
    """Per second over the last minute and the last five; None where not measured."""

    sent_1m: float | None
    sent_5m: float | None
    acked_1m: float | None
    acked_5m: float | None
    dead_lettered_1m: float | None
    dead_lettered_5m: float | None


@dataclass(frozen=True)
class Slot:
    """What the workers finished in one stored slot of ``SLOT`` seconds from ``start``,
    all priorities together: the series ``hailq doctor`` reads a plateau from."""

    start: float
    finished: int  # handler runs that ended (acked or failed)
    handler_seconds: float  # their handler time, summed


@dataclass(frozen=True)
class QueueFigures:
    """Everything a queue reports, as of ``at`` on the broker's clock."""

    queue: str
    at: float
    stats: QueueStats
    settings: QueueSettings
    rates: Rates
    priorities: list[PriorityFigures]
    workers: int  # worker processes consuming it now
    concurrency: int  # their handler slots per process (the mean, at least 1)
    handler_time: float | None  # mean seconds per message lately
    desired_workers: int
    wait: dict[int, Histogram] = field(default_factory=dict)
    handler: dict[int, Histogram] = field(default_factory=dict)
    autoscalers: list[AutoscalerInfo] = field(default_factory=list)  # each one's last
    decisions: list[AutoscalerInfo] = field(default_factory=list)  # the last few, newest first
    inbox_runs: int = 0  # handler runs that used an inbox or an ack transaction (rule 26)
    slots: list[Slot] = field(default_factory=list)  # the last minutes, oldest first

    def record(self) -> dict[str, Any]:
        """As JSON: the stats' fields, then the figures; per priority a list of objects."""
        from dataclasses import asdict

        s = self.stats
        return {**asdict(s), "delayed": s.delayed, "backlog": s.backlog,
                "rates": asdict(self.rates),
                "priorities": [asdict(p) for p in self.priorities],
                "workers": self.workers, "concurrency": self.concurrency,
                "handler_time": self.handler_time, "desired_workers": self.desired_workers,
                "autoscalers": [asdict(a) for a in self.autoscalers],
                "autoscale_decisions": [asdict(a) for a in self.decisions]}


def build(rows: FigureRows, settings: QueueSettings, workers: list[WorkerInfo],
          autoscalers: list[AutoscalerInfo] | None = None,
          decisions: list[AutoscalerInfo] | None = None) -> QueueFigures:
    """The figures of one queue from its stored rows, its settings, the registry and its
    autoscalers' decisions: the last of each (whose saturation points cap
    ``desired_workers``, see ``ceiling``) and the last few of all, newest first."""
    s, now = rows.stats, rows.now
    slo = settings.slo or {}
    wait: dict[int, list[tuple[float, int, float]]] = {}
    handler: dict[int, list[tuple[float, int, float]]] = {}
    inbox_runs = 0
    for kind, priority, le, n, total in rows.buckets:
        if kind == "inbox":
            inbox_runs += n
        elif kind in ("wait", "handler"):
            (wait if kind == "wait" else handler).setdefault(priority, []).append((le, n, total))
    bounds = bounds_for(slo)
    waits = {p: Histogram.of(b, bounds) for p, b in wait.items()}
    handlers = {p: Histogram.of(b, bounds) for p, b in handler.items()}

    recent: dict[int, list[float]] = {}  # priority -> started 1m, breaches 5m
    acked = {w: 0 for w in WINDOWS}
    finished, seconds = 0, 0.0
    first_slot = {w: int((now - w) // SLOT) for w in WINDOWS}
    series: dict[int, list[float]] = {}  # slot -> finished, handler seconds
    for slot, priority, started, ok, failed, breaches, handler_total in rows.rates:
        point = series.setdefault(slot, [0, 0.0])
        point[0] += ok + failed
        point[1] += handler_total
        cell = recent.setdefault(priority, [0.0, 0.0])
        if slot >= first_slot[60.0]:
            cell[0] += started
        if slot >= first_slot[300.0]:
            cell[1] += breaches
            finished += ok + failed
            seconds += handler_total
        for w in WINDOWS:
            if slot >= first_slot[w]:
                acked[w] += ok
    span = {w: now - first_slot[w] * SLOT for w in WINDOWS}

    priorities = []
    for p in sorted({*waits, *handlers, *slo}, reverse=True):
        wh, hh = waits.get(p), handlers.get(p)
        target = slo.get(p)
        count = wh.count if wh is not None else 0
        breaches = count - wh.within(target) if wh is not None and target is not None else 0
        started_1m, breaches_5m = recent.get(p, [0.0, 0.0])
        priorities.append(PriorityFigures(
            priority=p, slo=target, started=count,
            wait_p50=_q(wh, 0.5), wait_p95=_q(wh, 0.95), wait_p99=_q(wh, 0.99),
            handler_p50=_q(hh, 0.5), handler_p95=_q(hh, 0.95), handler_p99=_q(hh, 0.99),
            breaches=breaches,
            compliance=(count - breaches) / count if target is not None and count else None,
            started_per_second_1m=started_1m / span[60.0], breaches_5m=int(breaches_5m)))

    measured = bool(rows.rates or rows.samples)
    rates = Rates(
        sent_1m=_from_samples(rows, now, 60.0, 1), sent_5m=_from_samples(rows, now, 300.0, 1),
        acked_1m=acked[60.0] / span[60.0] if measured else None,
        acked_5m=acked[300.0] / span[300.0] if measured else None,
        dead_lettered_1m=_from_samples(rows, now, 60.0, 2),
        dead_lettered_5m=_from_samples(rows, now, 300.0, 2))

    alive = [w for w in workers if s.queue in w.queues and w.state == "running"
             and now - w.last_seen <= ALIVE_FOR]
    concurrency = max(math.floor(sum(w.concurrency for w in alive) / len(alive) + 0.5), 1) \
        if alive else 1
    handler_time = seconds / finished if finished else None
    if handler_time is None:  # nothing finished lately: the whole history's mean
        total = sum(h.total for h in handlers.values())
        count = sum(h.count for h in handlers.values())
        handler_time = total / count if count else None
    arrival = rates.sent_1m  # sampled by workers; None before any worker ran a second
    desired = desired_workers(Demand(
        ready=s.ready, in_flight=s.in_flight, oldest_ready_age=s.oldest_ready_age,
        arrival_rate=arrival, handler_time=handler_time, workers=len(alive),
        concurrency=concurrency, slo=tuple(slo.values()),
        max_in_flight=settings.max_in_flight, rate=settings.rate_per_second,
        ceiling=ceiling([a for a in autoscalers or [] if a.at >= now - CEILING_FOR])))
    return QueueFigures(queue=s.queue, at=now, stats=s, settings=settings, rates=rates,
                        priorities=priorities, workers=len(alive), concurrency=concurrency,
                        handler_time=handler_time, desired_workers=desired, wait=waits,
                        handler=handlers, autoscalers=list(autoscalers or []),
                        decisions=list(decisions or []), inbox_runs=inbox_runs,
                        slots=[Slot(slot * SLOT, int(f), t)
                               for slot, (f, t) in sorted(series.items())])


def ceiling(latest: list[AutoscalerInfo]) -> int | None:
    """The saturation point of a queue in worker processes, from the last decision of each
    of its autoscalers seen lately: the sum of their points when every one has one (an
    autoscaler without one has not found where more workers stop helping)."""
    if not latest or any(a.ceiling is None for a in latest):
        return None
    return sum(a.ceiling or 0 for a in latest)


def _q(h: Histogram | None, q: float) -> float | None:
    return None if h is None else h.quantile(q)


def _from_samples(rows: FigureRows, now: float, window: float, column: int) -> float | None:
    """Per second: the counter now minus its oldest sample within the window."""
    within = [r for r in rows.samples if r[0] >= now - window]
    if not within:
        return None
    at, sent, dead = within[0]
    if now - at < 1.0:
        return None
    current = rows.stats.sent if column == 1 else rows.stats.dead_lettered
    return max(current - (sent if column == 1 else dead), 0) / (now - at)
