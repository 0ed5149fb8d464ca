"""``hailq doctor`` (rule 26): the seed's four typical mistakes, read from stored figures.

Pure: ``evidence_of`` gathers what one queue's figures, dead letters and the
worker registry say into a ``QueueEvidence``; ``diagnose`` turns that into
findings, each with its numbers and a concrete suggestion. No I/O here, so
every threshold is tested with hand-built inputs.

- *poison*: a message failing again and again with one error, or several dead
  letters sharing one error. "lease expired" counts only where workers died
  (the message crashed them); without deaths it is the lease's doing.
- *lease_too_short*: late acks, or redeliveries no nack explains while no
  worker died; the suggested lease is ``LEASE_FACTOR`` x the p99 handler time,
  rounded up to a round number.
- *duplicate_effects*: redelivered messages on a queue whose measured handler
  runs never used an inbox (``hailq.inbox``) or an ack transaction.
- *saturated_downstream*: more handler slots than earlier in the window,
  throughput about flat, handler time well up. A queue running at its rate limit
  is not saturated: it gets the note ``at_rate_limit`` instead (issue 24).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from hailq.models import DeadMessage, WorkerInfo

if TYPE_CHECKING:
    from hailq.observe.figures import QueueFigures

Kind = Literal["poison", "lease_too_short", "duplicate_effects", "saturated_downstream"]
KINDS: tuple[Kind, ...] = ("poison", "lease_too_short", "duplicate_effects",
                           "saturated_downstream")
LEASE_EXPIRED = "lease expired"
# What a process pool's supervisor records on the messages a dead child held (runtime/held.py).
CHILD_DIED = "worker process exited with "
SLOT = 10.0  # seconds per stored slot of the figures (observe/figures.py)
ALIVE_FOR = 15.0  # a running worker silent this long has died (observe/figures.py)
LEASE_FACTOR = 3.0  # suggested lease: this many times the p99 handler time
ROUND_SECONDS = (1, 2, 3, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600, 900,
                 1200, 1800, 2700, 3600, 5400, 7200, 10800, 14400, 21600, 43200)
MAX_LEASE = 12 * 3600.0


@dataclass(frozen=True)
class Thresholds:
    """Where a sign becomes a finding; the defaults are documented in
    docs/operations/doctor.md."""

    poison_attempts: int = 2  # a message failed this many attempts with one error
    poison_group: int = 2  # or this many dead letters share one error
    saturation_capacity: float = 1.5  # handler slots grew at least this much ...
    saturation_throughput: float = 1.25  # ... throughput less than this ...
    saturation_handler: float = 1.5  # ... and handler time at least this much
    saturation_slots: int = 1  # complete slots needed on each side of the growth
    rate_limit_share: float = 0.8  # throughput this near the limit: at the limit


@dataclass(frozen=True)
class WorkerSpan:
    """A worker process of the queue as the registry remembers it."""

    id: str
    started_at: float
    last_seen: float
    state: str
    concurrency: int

    def died(self, now: float) -> bool:
        """Ended without saying so: not stopped, and silent for ``ALIVE_FOR``."""
        return self.state != "stopped" and now - self.last_seen > ALIVE_FOR

    def alive_at(self, t: float, now: float) -> bool:
        """It ran at ``t``: started by then, and not yet stopped or silent for good."""
        end = now if self.state != "stopped" and not self.died(now) else self.last_seen
        return self.started_at <= t <= end


@dataclass(frozen=True)
class SlotPoint:
    """One stored slot: handler runs that ended in it and their handler seconds."""

    start: float
    finished: int
    handler_seconds: float


@dataclass(frozen=True)
class QueueEvidence:
    """Everything ``diagnose`` reads about one queue."""

    queue: str
    now: float
    lease: float
    max_attempts: int
    rate: float | None  # the rate limit in messages per second, None without
    rate_text: str | None
    ready: int
    backlog: int
    in_flight: int
    nacked: int
    redelivered: int
    late_acks: int
    dead_lettered: int
    handler_p99: float | None  # the largest p99 over priorities
    handler_runs: int  # measured handler runs, all time
    inbox_runs: int  # of them, runs that used an inbox or an ack transaction
    acked_per_second: float | None  # over the last minute
    dead: Sequence[DeadMessage] = ()
    workers: Sequence[WorkerSpan] = ()
    slots: Sequence[SlotPoint] = ()


@dataclass(frozen=True)
class Finding:
    """One mistake on one queue: what it is, the numbers that show it, what to do."""

    queue: str
    kind: Kind
    title: str
    evidence: dict[str, Any]
    suggestion: str
    commands: list[str] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        """As JSON (``hailq doctor --json``)."""
        return {"queue": self.queue, "kind": self.kind, "title": self.title,
                "evidence": self.evidence, "suggestion": self.suggestion,
                "commands": list(self.commands)}


@dataclass(frozen=True)
class Note:
    """Worth knowing, not a mistake (no exit code 3): ``at_rate_limit``."""

    queue: str
    kind: str
    text: str
    evidence: dict[str, Any]

    def record(self) -> dict[str, Any]:
        """As JSON (``hailq doctor --json``)."""
        return {"queue": self.queue, "kind": self.kind, "text": self.text,
                "evidence": self.evidence}


@dataclass(frozen=True)
class Diagnosis:
    """What ``diagnose`` says of one queue; ``healthy`` when nothing was found."""

    queue: str
    findings: list[Finding]
    notes: list[Note]

    @property
    def healthy(self) -> bool:
        return not self.findings


def evidence_of(figures: QueueFigures, dead: Sequence[DeadMessage],
                workers: Sequence[WorkerInfo]) -> QueueEvidence:
    """Gather one queue's evidence from its figures, dead letters and the registry."""
    s, settings = figures.stats, figures.settings
    p99s = [p.handler_p99 for p in figures.priorities if p.handler_p99 is not None]
    return QueueEvidence(
        queue=s.queue, now=figures.at, lease=settings.lease,
        max_attempts=settings.max_attempts, rate=settings.rate_per_second,
        rate_text=settings.rate, ready=s.ready, backlog=s.backlog, in_flight=s.in_flight,
        nacked=s.nacked, redelivered=s.redelivered, late_acks=s.late_acks,
        dead_lettered=s.dead_lettered, handler_p99=max(p99s) if p99s else None,
        handler_runs=sum(h.count for h in figures.handler.values()),
        inbox_runs=figures.inbox_runs, acked_per_second=figures.rates.acked_1m,
        dead=list(dead),
        workers=[WorkerSpan(w.id, w.started_at, w.last_seen, w.state, w.concurrency)
                 for w in workers if s.queue in w.queues],
        slots=[SlotPoint(x.start, x.finished, x.handler_seconds) for x in figures.slots])


def diagnose(e: QueueEvidence, limits: Thresholds = Thresholds()) -> Diagnosis:
    """The findings (and notes) of one queue; none for a healthy one."""
    deaths = [w for w in e.workers if w.died(e.now)]
    findings = [f for f in (_poison(e, deaths, limits), _lease(e, deaths),
                            _duplicates(e)) if f is not None]
    notes: list[Note] = []
    limited = _at_rate_limit(e, limits)
    if limited is not None:
        notes.append(limited)
    else:
        saturated = _saturated(e, limits)
        if saturated is not None:
            findings.append(saturated)
    return Diagnosis(e.queue, findings, notes)


# -- poison -----------------------------------------------------------------------------

def signature(error: str | None) -> str:
    """What identifies an error: its last non-empty line (a traceback's exception line),
    cut to 200 characters."""
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    return (lines[-1] if lines else "(no error text)")[:200]


def _poison(e: QueueEvidence, deaths: list[WorkerSpan],
            limits: Thresholds) -> Finding | None:
    groups: dict[str, list[DeadMessage]] = {}
    repeated: dict[str, int] = {}  # signature -> messages that failed again and again with it
    for d in e.dead:
        sig = signature(d.last_error)
        if sig == LEASE_EXPIRED and not _crashed(d, deaths, e.lease):
            continue  # attempts ended by the lease alone: rule 2 below, not poison
        groups.setdefault(sig, []).append(d)
        same = sum(1 for a in d.errors if signature(a.error) == sig)
        if same >= limits.poison_attempts:
            repeated[sig] = repeated.get(sig, 0) + 1
    chosen = {sig: ds for sig, ds in groups.items()
              if repeated.get(sig, 0) > 0 or len(ds) >= limits.poison_group}
    if not chosen:
        return None
    ranked = sorted(chosen.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    listed: list[dict[str, Any]] = [
        {"error": sig, "dead_letters": len(ds), "failed_repeatedly": repeated.get(sig, 0),
         "attempts": sum(len(d.errors) for d in ds), "message_ids": [d.id for d in ds[:3]],
         "workers_died": sum(1 for w in deaths if any(_died_holding(w, d, e.lease)
                                                      for d in ds))}
        for sig, ds in ranked]
    top, first = ranked[0][0], listed[0]
    crashed = top == LEASE_EXPIRED or top.startswith(CHILD_DIED)
    count = sum(g["dead_letters"] for g in listed)
    what = ("kills the worker that runs it (its attempts end with the lease while workers "
            "die)" if crashed else f"fails with {top!r}")
    advice = [
        f"A message that {what}: {first['dead_letters']} dead letter(s) share this error, "
        f"{first['attempts']} failed attempts in all.",
        "Fix or handle that error in the handler; for input that can never succeed raise "
        "hailq.DeadLetter(reason) so it stops at once instead of using every attempt.",
        f"max_attempts is {e.max_attempts}: each poison message costs that many attempts"
        + (" and as many workers" if crashed else "") + "."]
    if e.max_attempts > 5:
        advice.append(f"Lower it: hailq configure {e.queue} --max-attempts 3.")
    advice.append("Inspect the dead letters, then redrive them once the handler is fixed.")
    commands = [f"hailq dead {e.queue} --grep {_quote(top[:60])}",
                f"hailq show {e.queue} {first['message_ids'][0]}",
                f"hailq redrive {e.queue} --grep {_quote(top[:60])}"]
    if e.max_attempts > 5:
        commands.insert(2, f"hailq configure {e.queue} --max-attempts 3")
    return Finding(
        e.queue, "poison", f"poison messages: {count} dead letter(s) with one error",
        {"dead_letters": count, "max_attempts": e.max_attempts, "errors": listed,
         "worker_deaths": len(deaths)},
        " ".join(advice), commands)


def _crashed(d: DeadMessage, deaths: list[WorkerSpan], lease: float) -> bool:
    return any(_died_holding(w, d, lease) for w in deaths)


def _died_holding(w: WorkerSpan, d: DeadMessage, lease: float) -> bool:
    """A dead worker whose last sign of life falls in a lease ending of ``d``: it died
    while it held the message (its heartbeat stops within one registry interval)."""
    return any((a.error == LEASE_EXPIRED and a.at - lease - SLOT <= w.last_seen <= a.at)
               or (a.error.startswith(CHILD_DIED) and a.at - SLOT <= w.last_seen <= a.at)
               for a in d.errors)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


# -- lease too short ----------------------------------------------------------------------

def round_up(value: float) -> float:
    """The first round number of seconds at or above ``value`` (at most 12 hours)."""
    for step in ROUND_SECONDS:
        if step >= value:
            return float(step)
    return MAX_LEASE


def _lease(e: QueueEvidence, deaths: list[WorkerSpan]) -> Finding | None:
    unexplained = max(e.redelivered - e.nacked, 0)  # redeliveries after an ended lease
    if not (e.late_acks > 0 or (unexplained > 0 and not deaths)):
        return None
    if e.handler_p99 is not None and round_up(LEASE_FACTOR * e.handler_p99) > e.lease:
        lease = round_up(LEASE_FACTOR * e.handler_p99)
        why = (f"the p99 handler time is {e.handler_p99:.3g} s against a lease of "
               f"{e.lease:g} s; {LEASE_FACTOR:g} x p99, rounded up, is {lease:g} s")
    else:
        lease = round_up(2 * e.lease)
        why = ("no handler time measured beyond the lease (consumers that receive and ack "
               "themselves, or a process that stalls and stops renewing: a handler that "
               f"holds the GIL, a paused VM); twice the lease, rounded up, is {lease:g} s")
    lease = min(lease, MAX_LEASE)
    parts = []
    if e.late_acks:
        parts.append(f"{e.late_acks} ack(s) came after their lease ended")
    if unexplained:
        parts.append(f"{unexplained} redelivery(ies) no nack explains")
    return Finding(
        e.queue, "lease_too_short",
        f"lease too short: {', '.join(parts)}, with "
        + ("no worker death" if not deaths else f"{len(deaths)} worker death(s)"),
        {"late_acks": e.late_acks, "redelivered": e.redelivered, "nacked": e.nacked,
         "redelivered_after_lease": unexplained, "worker_deaths": len(deaths),
         "lease": e.lease, "handler_p99": e.handler_p99, "suggested_lease": lease},
        f"Messages were handed out again while a handler still worked on them (two "
        f"handlers on one message). Give the queue a longer lease: {why}. hailq workers "
        "renew leases while a handler runs; consumers of their own should call "
        "message.extend() or queue.extend_many().",
        [f"hailq configure {e.queue} --lease {lease:g}"])


# -- duplicate effects --------------------------------------------------------------------

def _duplicates(e: QueueEvidence) -> Finding | None:
    if e.redelivered <= 0 or e.handler_runs <= 0 or e.inbox_runs > 0:
        return None
    return Finding(
        e.queue, "duplicate_effects",
        f"duplicate-effect risk: {e.redelivered} redelivered message(s), and none of "
        f"{e.handler_runs} handler runs used an inbox",
        {"redelivered": e.redelivered, "late_acks": e.late_acks,
         "handler_runs": e.handler_runs, "inbox_runs": e.inbox_runs},
        "A redelivered message runs its handler again, so whatever the first run did "
        "happens twice (two results, two payments). Record each message id in the same "
        "transaction as the effect: hailq.inbox(conn, 'consumer').record(message.id) in "
        "the consumer's own database, or message.transaction() when the effect lives in "
        "the broker's database (the effect and the ack commit together, exactly once).",
        ["hailq.inbox(conn, 'consumer').record(message.id)  # in the effect's transaction",
         "with message.transaction() as conn: ...  # effect + ack, one transaction"])


# -- saturated downstream -----------------------------------------------------------------

def _capacity(e: QueueEvidence, t: float) -> int:
    return sum(w.concurrency for w in e.workers if w.alive_at(t, e.now))


def _complete(e: QueueEvidence) -> list[tuple[int, SlotPoint]]:
    """Complete slots whose handler slots did not change within them, with that number."""
    out = []
    for point in e.slots:
        end = point.start + SLOT
        if end > e.now or point.finished <= 0:
            continue
        first, last = _capacity(e, point.start + 0.5), _capacity(e, end - 0.5)
        if first == last and first > 0:
            out.append((first, point))
    return out


def _saturated(e: QueueEvidence, limits: Thresholds) -> Finding | None:
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
        f"queue at what the downstream takes with a rate limit, rate=\"{rate}/s\"; "
        "'hailq autoscale' stops adding workers at such a plateau.",
        [f"hailq configure {e.queue} --rate {rate}/s",
         f"hailq autoscale TARGET --queue {e.queue} --min 1 --max {keep}"])


def _at_rate_limit(e: QueueEvidence, limits: Thresholds) -> Note | None:
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
