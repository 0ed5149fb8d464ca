"""What one queue reports (rules 25, 36): its stats, rates over the last minute, five
and hour (the rates of a window over one span), wait and handler time per priority
with service levels over the last 5 minutes and the last hour (percentiles within 2 %
of the exact ones, ``hailq/observe/sketch.py``), its workers and the
``desired_workers`` figure. Built from one snapshot of the stored figures."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from hailq.backends.base import FigureRows
from hailq.backends.figures import LONG, RATE_WINDOWS, SHORT, SLOT
from hailq.models import AutoscalerInfo, QueueStats, WorkerInfo
from hailq.observe.histogram import Histogram, bounds_for
from hailq.observe.sketch import Sketch
from hailq.policy.scaling import Backlog, Demand, deadline_workers, desired_workers
from hailq.settings import QueueSettings

ALIVE_FOR = 15.0  # a worker not heard of for this long is not counted
CEILING_FOR = 600.0  # an autoscaler's saturation point caps desired_workers this long


@dataclass(frozen=True)
class Spread:
    """Wait (available -> received) and handler time (received -> acked or nacked) of
    one priority over the last ``window`` seconds (rule 36): claims ``started`` then,
    their ``breaches`` of the target and ``compliance`` (share within it), nearest-rank
    percentiles within 2 % (or 1 ms) of the exact ones, and the largest value seen."""

    window: float
    started: int
    breaches: int
    compliance: float | None
    wait_p50: float | None
    wait_p95: float | None
    wait_p99: float | None
    wait_max: float | None
    handler_p50: float | None
    handler_p95: float | None
    handler_p99: float | None
    handler_max: float | None


@dataclass(frozen=True)
class PriorityFigures(Spread):
    """One priority's figures: its ``Spread`` over the last ``window`` seconds (5 minutes;
    ``hour``: the same over the last hour), with its target ``slo``. ``breaches_total``
    counts every breach since the queue was first measured (Prometheus' counter)."""

    priority: int
    slo: float | None
    started_per_second_1m: float
    breaches_5m: int  # the same as ``breaches`` (the window is 5 minutes)
    breaches_total: int
    hour: Spread
    sent_per_second_1m: float = 0.0  # sends of this priority (rule 41's arrival rate)


@dataclass(frozen=True)
class Rates:
    """Per second over the last minute, five and hour; None where not measured. The
    rates of one window share one span (rule 36): ``span_1m`` etc. say over how many
    seconds they were taken (less than the window for a younger queue)."""

    sent_1m: float | None
    sent_5m: float | None
    acked_1m: float | None
    acked_5m: float | None
    dead_lettered_1m: float | None
    dead_lettered_5m: float | None
    span_1m: float | None = None
    span_5m: float | None = None
    sent_1h: float | None = None
    acked_1h: float | None = None
    dead_lettered_1h: float | None = None
    span_1h: float | None = None


@dataclass(frozen=True)
class Slot:
    """What the workers finished in one stored slot of ``SLOT`` seconds from ``start``,
    all priorities together: the series ``hailq doctor`` reads a plateau from."""

    start: float
    finished: int  # handler runs that ended (acked or failed)
    handler_seconds: float  # their handler time, summed


@dataclass(frozen=True)
class QueueFigures:
    """Everything a queue reports, as of ``at`` on the broker's clock. Percentiles and
    breaches cover the last ``window`` seconds (``*_1h``: the last hour); ``wait`` and
    ``handler`` are all-time histograms (Prometheus)."""

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
    # Deadline order (rule 41): why no pool meets every target (then ``desired_workers``
    # is the largest useful pool); None where one does, or in priority order.
    desired_workers_reason: str | None = None
    # Deadline order: the smallest pool that meets every target (else the largest useful
    # one) before any saturation point caps it: ``hailq autoscale``'s target, which it
    # caps with its own point (one it may probe above). None in priority order.
    deadline_pool: int | None = None
    wait: dict[int, Histogram] = field(default_factory=dict)
    handler: dict[int, Histogram] = field(default_factory=dict)
    autoscalers: list[AutoscalerInfo] = field(default_factory=list)  # each one's last
    decisions: list[AutoscalerInfo] = field(default_factory=list)  # the last few, newest first
    inbox_runs: int = 0  # handler runs that used an inbox or an ack transaction (rule 26)
    slots: list[Slot] = field(default_factory=list)  # the last minutes, oldest first
    window: float = SHORT
    # Handler time of every priority together over ``window`` and over the last hour.
    handler_p99: float | None = None
    handler_max: float | None = None
    handler_p99_1h: float | None = None
    handler_max_1h: float | None = None

    def record(self) -> dict[str, Any]:
        """As JSON: the stats' fields, then the figures; per priority a list of objects."""
        s = self.stats
        return {**asdict(s), "delayed": s.delayed, "backlog": s.backlog,
                "rates": asdict(self.rates), "window": self.window,
                "priorities": [{"priority": p.priority, "slo": p.slo, **asdict(p)}
                               for p in self.priorities],
                "handler_p99": self.handler_p99, "handler_max": self.handler_max,
                "handler_p99_1h": self.handler_p99_1h, "handler_max_1h": self.handler_max_1h,
                "workers": self.workers, "concurrency": self.concurrency,
                "handler_time": self.handler_time, "desired_workers": self.desired_workers,
                "desired_workers_reason": self.desired_workers_reason,
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
    sketches = _sketches(rows)

    # Rate slots: per priority the claims and breaches of each window, the series.
    first = {w: int((now - w) // SLOT) * SLOT for w in (60.0, SHORT, LONG)}
    counts: dict[tuple[int, float], list[int]] = {}  # (priority, window) -> started, breaches
    finished, seconds = 0, 0.0
    series: dict[float, list[float]] = {}  # slot start -> finished, handler seconds
    for r in rows.rates:
        for w, start in first.items():
            if r.slot >= start:
                cell = counts.setdefault((r.priority, w), [0, 0])
                cell[0] += r.started
                cell[1] += r.breaches
        if r.slot >= first[SHORT]:
            point = series.setdefault(r.slot, [0, 0.0])
            point[0] += r.acked + r.failed
            point[1] += r.handler_total
            finished += r.acked + r.failed
            seconds += r.handler_total
    born = rows.created_at if rows.created_at is not None else -math.inf
    span_1m = max(now - max(first[60.0], born), 1.0)
    sent_1m: dict[int, int] = {}  # priority -> sends in the last minute's slots
    for slot, priority, n in rows.sends:
        if slot >= first[60.0]:
            sent_1m[priority] = sent_1m.get(priority, 0) + n

    priorities = []
    for p in sorted({*waits, *handlers, *slo, *(k[1] for k in sketches),
                     *(r.priority for r in rows.rates), *sent_1m}, reverse=True):
        target = slo.get(p)
        short, hour = (_spread(w, target, counts.get((p, w), [0, 0]), sketches.get((w, p)))
                       for w in (SHORT, LONG))
        wh = waits.get(p)
        total = wh.count - wh.within(target) if wh is not None and target is not None else 0
        priorities.append(PriorityFigures(
            **asdict(short), priority=p, slo=target,
            started_per_second_1m=counts.get((p, 60.0), [0, 0])[0] / span_1m,
            breaches_5m=short.breaches, breaches_total=total, hour=hour,
            sent_per_second_1m=sent_1m.get(p, 0) / span_1m))

    rates = _rates(rows)
    alive = [w for w in workers if s.queue in w.queues and w.state == "running"
             and now - w.last_seen <= ALIVE_FOR]
    concurrency = max(math.floor(sum(w.concurrency for w in alive) / len(alive) + 0.5), 1) \
        if alive else 1
    handler_time = seconds / finished if finished else None
    if handler_time is None:  # nothing finished lately: the whole history's mean
        total_s = sum(h.total for h in handlers.values())
        count = sum(h.count for h in handlers.values())
        handler_time = total_s / count if count else None
    arrival = rates.sent_1m  # over the same span as acked_1m (rule 36)
    demand = Demand(
        ready=s.ready, in_flight=s.in_flight, oldest_ready_age=s.oldest_ready_age,
        arrival_rate=arrival, handler_time=handler_time, workers=len(alive),
        concurrency=concurrency, slo=tuple(slo.values()),
        max_in_flight=settings.max_in_flight, rate=settings.rate_per_second,
        ceiling=ceiling([a for a in autoscalers or [] if a.at >= now - CEILING_FOR]))
    desired, reason, pool = desired_workers(demand), None, None
    if settings.order == "deadline" and slo and rows.ready_first is not None:
        # The arrival rate of each priority as recorded by the sends (rule 41).
        arrivals = {f.priority: f.sent_per_second_1m for f in priorities
                    if f.sent_per_second_1m > 0}
        answer = deadline_workers(replace(demand, ceiling=None),
                                  Backlog(now, slo, rows.ready_first, arrivals))
        pool, reason = answer.workers, answer.reason
        desired = pool if demand.ceiling is None else min(pool, max(demand.ceiling, 1))
    every = {w: _merged(sketches, w, "handler") for w in (SHORT, LONG)}
    return QueueFigures(queue=s.queue, at=now, stats=s, settings=settings, rates=rates,
                        priorities=priorities, workers=len(alive), concurrency=concurrency,
                        handler_time=handler_time, desired_workers=desired, wait=waits,
                        handler=handlers, autoscalers=list(autoscalers or []),
                        decisions=list(decisions or []), inbox_runs=inbox_runs,
                        slots=[Slot(start, int(f), t)
                               for start, (f, t) in sorted(series.items())],
                        handler_p99=every[SHORT].quantile(0.99), handler_max=every[SHORT].hi,
                        handler_p99_1h=every[LONG].quantile(0.99),
                        handler_max_1h=every[LONG].hi, desired_workers_reason=reason,
                        deadline_pool=pool)


def ceiling(latest: list[AutoscalerInfo]) -> int | None:
    """The saturation point of a queue in worker processes, from the last decision of each
    of its autoscalers seen lately: the sum of their points when every one has one (an
    autoscaler without one has not found where more workers stop helping)."""
    if not latest or any(a.ceiling is None for a in latest):
        return None
    return sum(a.ceiling or 0 for a in latest)


_Sketches = dict[tuple[float, int], dict[str, Sketch]]  # (window, priority) -> kind -> ...


def _sketches(rows: FigureRows) -> _Sketches:
    """The stored sketch rows as one merged sketch per window, priority and kind."""
    windows = (SHORT, LONG)
    buckets: dict[tuple[float, int, str], list[tuple[int, int]]] = {}
    ranges: dict[tuple[float, int, str], list[tuple[int, float, float, float]]] = {}
    for k in rows.sketches:
        buckets.setdefault((windows[k.window], k.priority, k.kind), []).append((k.bucket, k.n))
    for g in rows.ranges:
        ranges.setdefault((windows[g.window], g.priority, g.kind), []).append(
            (g.n, g.total, g.lo, g.hi))
    out: _Sketches = {}
    for key in {*buckets, *ranges}:
        w, p, kind = key
        out.setdefault((w, p), {})[kind] = Sketch.merge(buckets.get(key, []),
                                                        ranges.get(key, []))
    return out


def _merged(sketches: _Sketches, window: float, kind: str) -> Sketch:
    """One kind's sketch of every priority together over ``window``."""
    parts = [by[kind] for (w, _), by in sketches.items() if w == window and kind in by]
    counts: dict[int, int] = {}
    for part in parts:
        for index, n in part.counts.items():
            counts[index] = counts.get(index, 0) + n
    return Sketch.merge(counts.items(), [(x.n, x.total, x.lo, x.hi) for x in parts
                                         if x.lo is not None and x.hi is not None])


def _spread(window: float, target: float | None, counted: list[int],
            by_kind: dict[str, Sketch] | None) -> Spread:
    started, breaches = counted
    empty = Sketch({}, 0, 0.0, None, None)
    w = (by_kind or {}).get("wait", empty)
    h = (by_kind or {}).get("handler", empty)
    return Spread(
        window=window, started=started, breaches=breaches if target is not None else 0,
        compliance=(started - breaches) / started if target is not None and started else None,
        wait_p50=w.quantile(0.5), wait_p95=w.quantile(0.95), wait_p99=w.quantile(0.99),
        wait_max=w.hi, handler_p50=h.quantile(0.5), handler_p95=h.quantile(0.95),
        handler_p99=h.quantile(0.99), handler_max=h.hi)


def _rates(rows: FigureRows) -> Rates:
    """Sent, acked and dead-lettered per second over the last minute, five and hour, each
    window's three over one span: from the counters where the window starts to the
    counters now. Where it starts: the last sample at or before its start (counters move
    only where some process samples them within a second, so they held still since);
    else, for a queue made within the window, zero at its creation; else the first
    sample inside the window (measured since then only)."""
    now = rows.now
    current = (rows.stats.sent, rows.acked, rows.stats.dead_lettered)
    before = {p.window: p for p in rows.points if p.after == 0}
    after = {p.window: p for p in rows.points if p.after == 1}
    found: dict[float, tuple[float | None, float | None, float | None, float | None]] = {}
    for w in RATE_WINDOWS:
        start: tuple[float, int, int, int] | None = None
        if w in before:
            b = before[w]
            start = (now - w, b.sent, b.acked, b.dead_lettered)
        elif rows.created_at is not None and rows.created_at > now - w:
            start = (rows.created_at, 0, 0, 0)
        elif w in after:
            a = after[w]
            start = (a.at, a.sent, a.acked, a.dead_lettered)
        span = now - start[0] if start is not None else 0.0
        if start is None or span < 1.0:
            found[w] = (None, None, None, None)
            continue
        sent, acked, dead = (max(c - s0, 0) / span
                             for c, s0 in zip(current, start[1:], strict=True))
        found[w] = (sent, acked, dead, span)
    (s1, a1, d1, p1), (s5, a5, d5, p5), (sh, ah, dh, ph) = (found[w] for w in RATE_WINDOWS)
    return Rates(sent_1m=s1, sent_5m=s5, acked_1m=a1, acked_5m=a5, dead_lettered_1m=d1,
                 dead_lettered_5m=d5, span_1m=p1, span_5m=p5, sent_1h=sh, acked_1h=ah,
                 dead_lettered_1h=dh, span_1h=ph)
