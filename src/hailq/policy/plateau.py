"""``hailq doctor``'s two readings of a throughput plateau (rule 26), from the window's
10-second slots and the worker registry: a *saturated downstream* (more handler slots,
throughput about flat, handler time well up) is a finding; a queue running at its rate
limit gets the note ``at_rate_limit`` instead (issue 24)."""

from __future__ import annotations

import math

from hailq.policy.findings import (
    Finding,
    Note,
    QueueEvidence,
    SlotPoint,
    Thresholds,
    python,
    shell,
)

SLOT = 10.0  # seconds per stored slot of the figures (observe/figures.py)


def _capacity(e: QueueEvidence, t: float) -> int:
    return sum(w.concurrency for w in e.workers if w.alive_at(t, e.now))


def _complete(e: QueueEvidence) -> list[tuple[int, SlotPoint]]:
    """Complete slots of the window whose handler slots did not change within them,
    with that number."""
    out = []
    for point in e.slots:
        end = point.start + SLOT
        if end > e.now or point.start < e.start or point.finished <= 0:
            continue
        first, last = _capacity(e, point.start + 0.5), _capacity(e, end - 0.5)
        if first == last and first > 0:
            out.append((first, point))
    return out


def saturated(e: QueueEvidence, limits: Thresholds) -> Finding | None:
    """More handler slots, flat throughput, longer handler time; None otherwise."""
    points = _complete(e)
    if not points:
        return None
    low, high = min(c for c, _ in points), max(c for c, _ in points)
    before = [p for c, p in points if c == low]
    after = [p for c, p in points if c == high and p.start > max(b.start for b in before)]
    if len(before) < limits.saturation_slots or len(after) < limits.saturation_slots \
            or high < low * limits.saturation_capacity:
        return None
    rate0, rate1 = (sum(p.finished for p in ps) / (SLOT * len(ps)) for ps in (before, after))
    time0, time1 = (sum(p.handler_seconds for p in ps) / sum(p.finished for p in ps)
                    for ps in (before, after))
    if rate1 >= rate0 * limits.saturation_throughput or time1 < time0 * limits.saturation_handler:
        return None
    per_worker = max(1, round(sum(w.concurrency for w in e.workers) / max(len(e.workers), 1)))
    keep = max(1, math.ceil(low / per_worker))
    rate = max(1, math.floor(rate0))
    return Finding(
        e.queue, "saturated_downstream",
        f"saturated downstream: handler slots {low} -> {high}, throughput "
        f"{rate0:.3g}/s -> {rate1:.3g}/s, handler time {time0:.3g} s -> {time1:.3g} s",
        {"slots_before": low, "slots_after": high, "throughput_before": round(rate0, 3),
         "throughput_after": round(rate1, 3), "handler_time_before": round(time0, 4),
         "handler_time_after": round(time1, 4), "backlog": e.backlog,
         "window_slots": [len(before), len(after)], "suggested_rate": f"{rate}/s"},
        f"More workers did not raise throughput; each handler only waited longer: "
        f"what they call (a database, an API) serves about {rate0:.3g} messages a second. "
        f"Go back to about {keep} worker process(es) ({low} handler slots), or cap the "
        f"queue at what the downstream takes with a rate limit of {rate}/s; "
        "'hailq autoscale' stops adding workers at such a plateau.",
        [shell(f"hailq configure {e.queue} --rate {rate}/s"),
         python(f"broker.configure({e.queue!r}, rate={f'{rate}/s'!r})"),
         shell(f"hailq autoscale TARGET --queue {e.queue} --min 1 --max {keep}")])


def at_rate_limit(e: QueueEvidence, limits: Thresholds) -> Note | None:
    """Throughput at its rate limit with a backlog: the limit's doing, not saturation."""
    if e.rate is None:
        return None
    recent = [p for p in e.slots if p.start + SLOT <= e.now][-3:]
    measured = ([sum(p.finished for p in recent) / (SLOT * len(recent))] if recent else []) \
        + ([e.acked_per_second] if e.acked_per_second is not None else [])
    pace = max(measured, default=0.0)
    if pace < e.rate * limits.rate_limit_share or e.backlog <= 0:
        return None
    return Note(
        e.queue, "at_rate_limit",
        f"runs at its rate limit ({e.rate_text}: {pace:.3g} of {e.rate:.3g} messages a "
        f"second) with a backlog of {e.backlog}: more workers would not drain it faster; "
        "raise the rate if what the handlers call can take more. Not a saturated "
        "downstream.",
        {"rate": e.rate_text, "rate_per_second": e.rate, "throughput": round(pace, 3),
         "backlog": e.backlog})
