"""What ``hailq doctor`` reads of one queue over its window (rules 26, 36), gathered from
plain rows into a ``QueueEvidence``: the queue's figures, the stored 10-second slots of
the window, its dead letters and the worker registry. Pure: the rows are read by the
caller (``hailq/cli/commands_doctor.py``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hailq.backends.figure_rows import RateSlot
from hailq.models import DeadMessage, WorkerInfo
from hailq.policy.findings import LEASE_EXPIRED, QueueEvidence, SlotPoint, WorkerSpan

if TYPE_CHECKING:
    from hailq.observe.figures import QueueFigures
    from hailq.observe.histogram import Histogram

SLOT = 10.0  # seconds per stored slot of the figures (observe/figures.py)
DEFAULT_SINCE = 15 * 60.0  # the window the doctor speaks of, by default
MAX_SINCE = 24 * 3600.0  # as far back as the per-slot figures are kept
MIN_SINCE = SLOT  # one stored slot


# One stored slot of one priority, as ``figures_window`` returns it: its start on the
# broker's clock, and its claims, ends, handler seconds, redeliveries and late acks.
WindowSlot = RateSlot


def reach(figures: QueueFigures, since: float) -> float:
    """Where the slots to read for a window of ``since`` seconds begin: the window, and
    before it the longest retry backoff, so that a nack just before the window explains
    its redelivery inside it."""
    return figures.at - since - min(figures.settings.retry.max, MAX_SINCE)


def evidence_of(figures: QueueFigures, dead: Sequence[DeadMessage],
                workers: Sequence[WorkerInfo], *, since: float = DEFAULT_SINCE,
                window: Sequence[WindowSlot] | None = None) -> QueueEvidence:
    """One queue's evidence over the last ``since`` seconds: counts from ``window`` (the
    stored slots from ``reach(figures, since)`` on), handler times from ``figures``, dead
    letters of any age (``diagnose`` sets the older ones apart), and the registry.
    Without ``window`` the counts are the queue's totals since it was created."""
    s, settings = figures.stats, figures.settings
    p99, largest = _handler_times(figures, since)
    start = figures.at - since
    if window is None:
        nacked, redelivered, late, final = s.nacked, s.redelivered, s.late_acks, 0
        runs, inbox = sum(h.count for h in figures.handler.values()), figures.inbox_runs
        slots = [SlotPoint(x.start, x.finished, x.handler_seconds) for x in figures.slots]
    else:
        inside = [r for r in window if r.slot + SLOT > start]
        # Nacks from one retry backoff before the window on (see reach()), less the last
        # attempts of messages that died then: no redelivery followed those.
        early = reach(figures, since)
        nacked = sum(r.failed for r in window if r.slot + SLOT > early)
        final = sum(1 for d in dead if d.dead_at >= early
                    and (d.last_error or "").strip() != LEASE_EXPIRED)
        redelivered = sum(r.redelivered for r in inside)
        runs = sum(r.acked + r.failed for r in inside)
        inbox = sum(r.inbox for r in inside)
        per_slot: dict[float, list[float]] = {}
        for r in inside:
            point = per_slot.setdefault(r.slot, [0, 0.0])
            point[0] += r.acked + r.failed
            point[1] += r.handler_total
        slots = [SlotPoint(t, int(n), h) for t, (n, h) in sorted(per_slot.items())]
        late = sum(r.late_acks for r in inside)  # acks after their lease ended
    return QueueEvidence(
        queue=s.queue, now=figures.at, since=since, lease=settings.lease,
        max_attempts=settings.max_attempts, rate=settings.rate_per_second,
        rate_text=settings.rate, ready=s.ready, backlog=s.backlog, in_flight=s.in_flight,
        nacked=nacked, final_nacks=min(final, nacked), redelivered=redelivered,
        late_acks=late,
        dead_lettered=s.dead_lettered, handler_p99=p99, handler_max=largest,
        handler_runs=runs, inbox_runs=inbox, acked_per_second=figures.rates.acked_1m,
        dead=list(dead),
        workers=[WorkerSpan(w.id, w.started_at, w.last_seen, w.state, w.concurrency)
                 for w in workers if s.queue in w.queues],
        slots=slots, deadline_order=settings.order == "deadline",
        workers_now=figures.workers, concurrency=figures.concurrency,
        desired_workers=figures.desired_workers, pool_reason=figures.desired_workers_reason)


def _handler_times(figures: QueueFigures, since: float) -> tuple[float | None, float | None]:
    """The p99 and the largest handler time of every priority together: over the figures'
    short window when it holds the doctor's, else over the last hour (the sketches are
    kept an hour: for a longer window, the hour is the part that can be read); with no
    run in the last hour, the all-time histograms (the largest, an upper bound)."""
    if since <= figures.window and figures.handler_p99 is not None:
        return figures.handler_p99, figures.handler_max
    if figures.handler_p99_1h is not None:
        return figures.handler_p99_1h, figures.handler_max_1h
    p99s = [p for h in figures.handler.values() if (p := h.quantile(0.99)) is not None]
    tops = [t for h in figures.handler.values() if (t := _largest(h)) is not None]
    return max(p99s, default=None), max(tops, default=None)


def _largest(h: Histogram) -> float | None:
    """An upper bound of the largest observation: the top of the highest bucket used
    (for the open last bucket, the bound below it)."""
    used = [b for b, n in zip(h.bounds, h.counts, strict=True) if n]
    if not used:
        return None
    if math.isinf(used[-1]):
        finite = [b for b in h.bounds if not math.isinf(b)]
        return finite[-1] if finite else None
    return used[-1]
