"""``hailq doctor`` (rule 26): the seed's four typical mistakes, read from stored figures
over a recent window (rule 36: a queue that is healthy now is reported healthy).

Pure: ``evidence_of`` gathers what one queue's figures, dead letters and the
worker registry say about the last ``since`` seconds into a ``QueueEvidence``;
``diagnose`` turns that into findings, each with its numbers, a suggestion in
words and snippets to run (shell or Python, said as which). No I/O here, so
every threshold is tested with hand-built inputs.

- *poison*: per distinct error (its signature), the dead letters of the window
  where a message failed again and again with it, or several share it: one
  finding per error. "lease expired" counts only where workers died (the message
  crashed them); without deaths it is the lease's doing. Dead letters older than
  the window are a note (``earlier_dead_letters``), not a finding.
- *lease_too_short*: late acks, or redeliveries no nack explains while no
  worker died, in the window; the suggested lease is at least ``LEASE_FACTOR`` x
  the p99 handler time and never below the largest handler time, rounded up.
- *duplicate_effects*: redeliveries in the window, and none of the window's
  measured handler runs used an inbox (``hailq.inbox``) or an ack transaction.
- *saturated_downstream* and the note ``at_rate_limit``: ``hailq/policy/plateau.py``.
- *pool_too_small*: a queue in deadline order runs fewer workers than the pool that
  meets every target (its ``desired_workers``, rule 41), or than the largest useful
  one where none can.
"""

from __future__ import annotations

import re

from hailq.models import DeadMessage
from hailq.policy.evidence import (
    DEFAULT_SINCE,
    MAX_SINCE,
    MIN_SINCE,
    WindowSlot,
    evidence_of,
    reach,
)
from hailq.policy.findings import (
    CHILD_DIED,
    KINDS,
    LEASE_EXPIRED,
    Diagnosis,
    Finding,
    Kind,
    Note,
    QueueEvidence,
    SlotPoint,
    Snippet,
    Thresholds,
    WorkerSpan,
    python,
    shell,
)
from hailq.policy.plateau import SLOT, at_rate_limit, saturated

__all__ = ["DEFAULT_SINCE", "KINDS", "MAX_SINCE", "MIN_SINCE", "Diagnosis", "Finding", "Kind",
           "Note", "QueueEvidence", "SlotPoint", "Snippet", "Thresholds", "WindowSlot",
           "WorkerSpan", "diagnose", "evidence_of", "reach", "round_up", "signature",
           "suggested_lease"]

LEASE_FACTOR = 3.0  # suggested lease: at least this many times the p99 handler time
ROUND_SECONDS = (1, 2, 3, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600, 900,
                 1200, 1800, 2700, 3600, 5400, 7200, 10800, 14400, 21600, 43200)
MAX_LEASE = 12 * 3600.0


def diagnose(e: QueueEvidence, limits: Thresholds | None = None) -> Diagnosis:
    """The findings (and notes) of one queue over its window; none for a healthy one."""
    limits = limits or Thresholds()
    # A worker that died in the window, or just before it while it held a lease that
    # ended inside it.
    deaths = [w for w in e.workers if w.died(e.now) and w.last_seen >= e.start - e.lease]
    recent = [d for d in e.dead if d.dead_at >= e.start]
    findings = _poison(e, recent, deaths, limits)
    findings += [f for f in (_lease(e, deaths), _duplicates(e), _pool(e)) if f is not None]
    notes: list[Note] = []
    limited = at_rate_limit(e, limits)
    if limited is not None:
        notes.append(limited)
    else:
        plateau = saturated(e, limits)
        if plateau is not None:
            findings.append(plateau)
    earlier = [d for d in e.dead if d.dead_at < e.start]
    if earlier:
        notes.append(_earlier(e, earlier))
    return Diagnosis(e.queue, findings, notes)


def window_text(seconds: float) -> str:
    """``15 minutes``, ``1 hour``, ``90 seconds``: how the window is named in words."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds:g} seconds"


# -- poison -----------------------------------------------------------------------------

def signature(error: str | None) -> str:
    """What identifies an error: its last non-empty line (a traceback's exception line),
    cut to 200 characters."""
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    return (lines[-1] if lines else "(no error text)")[:200]


def _poison(e: QueueEvidence, recent: list[DeadMessage], deaths: list[WorkerSpan],
            limits: Thresholds) -> list[Finding]:
    """One finding per error signature shared or repeated by the window's dead letters,
    the most frequent first."""
    groups: dict[str, list[DeadMessage]] = {}
    repeated: dict[str, int] = {}  # signature -> messages that failed again and again with it
    for d in recent:
        sig = signature(d.last_error)
        if sig == LEASE_EXPIRED and not any(_died_holding(w, d, e.lease) for w in deaths):
            continue  # attempts ended by the lease alone: the lease's finding, not poison
        groups.setdefault(sig, []).append(d)
        if sum(1 for a in d.errors if signature(a.error) == sig) >= limits.poison_attempts:
            repeated[sig] = repeated.get(sig, 0) + 1
    chosen = [(sig, ds) for sig, ds in groups.items()
              if repeated.get(sig, 0) > 0 or len(ds) >= limits.poison_group]
    chosen.sort(key=lambda kv: (-len(kv[1]), kv[0]))
    return [_poison_group(e, sig, ds, repeated.get(sig, 0), deaths) for sig, ds in chosen]


def _poison_group(e: QueueEvidence, sig: str, ds: list[DeadMessage], repeated: int,
                  deaths: list[WorkerSpan]) -> Finding:
    crashed = sig == LEASE_EXPIRED or sig.startswith(CHILD_DIED)
    attempts = sum(len(d.errors) for d in ds)
    ids = [d.id for d in ds[:3]]
    died = sum(1 for w in deaths if any(_died_holding(w, d, e.lease) for d in ds))
    what = ("kills the worker that runs it (its attempts end as its worker process dies)"
            if crashed else f"fails with {sig!r}")
    advice = [f"A message that {what}: {len(ds)} dead letter(s) in the last "
              f"{window_text(e.since)}, {attempts} failed attempts in all."]
    if crashed:
        advice.append("Find what in these messages crashes the process (memory, a C "
                      "extension, a segfault) and check it before the work starts.")
    else:
        advice.append("Fix or handle this error in the handler; for input that can never "
                      "succeed raise hailq.DeadLetter(reason), so it stops at once instead "
                      "of using every attempt.")
    advice.append(f"max_attempts is {e.max_attempts}: each such message costs that many "
                  "attempts" + (" and as many workers" if crashed else "") + ".")
    grep = _quote(sig[:60])
    snippets = [shell(f"hailq dead {e.queue} --grep {grep}"),
                shell(f"hailq show {e.queue} {ids[0]}")]
    if e.max_attempts > 5:
        advice.append("Lower it to 3.")
        snippets.append(shell(f"hailq configure {e.queue} --max-attempts 3"))
    advice.append("Inspect the dead letters, then redrive them once the handler is fixed.")
    snippets.append(shell(f"hailq redrive {e.queue} --grep {grep}"))
    exception = _exception_name(sig)
    if exception is not None:
        snippets.append(python(
            f"try:\n    ...  # the handler's work\nexcept {exception} as exc:  "
            "# this input never succeeds\n    raise hailq.DeadLetter(str(exc)) from exc"))
    title = (f"poison messages: {len(ds)} dead letter(s) whose workers died running them"
             if crashed else f"poison messages: {len(ds)} dead letter(s) failing with "
             f"{_short(sig)}")
    return Finding(
        e.queue, "poison", title,
        {"error": sig, "dead_letters": len(ds), "failed_repeatedly": repeated,
         "attempts": attempts, "message_ids": ids, "workers_died": died,
         "first_dead_at": min(d.dead_at for d in ds), "last_dead_at": max(d.dead_at for d in ds),
         "max_attempts": e.max_attempts, "worker_deaths": len(deaths)},
        " ".join(advice), snippets)


_EXCEPTION = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?::|$)")


def _exception_name(sig: str) -> str | None:
    """``ValueError`` of ``ValueError: corrupt photo`` (a traceback's last line); None
    for text that names no exception."""
    found = _EXCEPTION.match(sig)
    if found is None or sig == LEASE_EXPIRED or sig.startswith(CHILD_DIED):
        return None
    name = found.group(1).rsplit(".", 1)[-1]
    return found.group(1) if name.endswith(("Error", "Exception")) else None


def _died_holding(w: WorkerSpan, d: DeadMessage, lease: float) -> bool:
    """A dead worker whose last sign of life falls in a lease ending of ``d``: it died
    while it held the message (its heartbeat stops within one registry interval)."""
    return any((a.error == LEASE_EXPIRED and a.at - lease - SLOT <= w.last_seen <= a.at)
               or (a.error.startswith(CHILD_DIED) and a.at - SLOT <= w.last_seen <= a.at)
               for a in d.errors)


def _quote(text: str) -> str:
    """``text`` as one shell word: in single quotes, or in double quotes when it holds a
    single quote and nothing a shell expands inside double quotes."""
    if "'" in text and not any(c in text for c in '"$`\\!'):
        return '"' + text + '"'
    return "'" + text.replace("'", "'\\''") + "'"


def _short(text: str, width: int = 80) -> str:
    return repr(text if len(text) <= width else text[:width - 1] + "…")


def _earlier(e: QueueEvidence, earlier: list[DeadMessage]) -> Note:
    errors = {signature(d.last_error) for d in earlier}
    last = max(d.dead_at for d in earlier)
    return Note(
        e.queue, "earlier_dead_letters",
        f"{len(earlier)} dead letter(s) from before the last {window_text(e.since)} "
        f"({len(errors)} distinct error(s), the last {_ago(e.now - last)} ago): not counted; "
        f"'hailq dead {e.queue}' lists them, 'hailq doctor --since' looks further back.",
        {"dead_letters": len(earlier), "errors": len(errors), "last_dead_at": last})


def _ago(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


# -- lease too short ----------------------------------------------------------------------

def round_up(value: float) -> float:
    """The first round number of seconds at or above ``value`` (at most 12 hours)."""
    for step in ROUND_SECONDS:
        if step >= value:
            return float(step)
    return MAX_LEASE


def suggested_lease(lease: float, p99: float | None, largest: float | None) -> float:
    """At least ``LEASE_FACTOR`` x the p99 handler time and never below the largest one,
    rounded up; twice the lease when what was measured fits in it (the process stalled
    and stopped renewing, or nothing was measured)."""
    need = max((v for v in (None if p99 is None else LEASE_FACTOR * p99, largest)
                if v is not None), default=None)
    if need is not None and round_up(need) > lease:
        return min(round_up(need), MAX_LEASE)
    return min(round_up(max(2 * lease, largest or 0.0)), MAX_LEASE)


def _lease(e: QueueEvidence, deaths: list[WorkerSpan]) -> Finding | None:
    # Redeliveries after an ended lease: those no nack followed by a retry explains.
    unexplained = max(e.redelivered - (e.nacked - e.final_nacks), 0)
    if not (e.late_acks > 0 or (unexplained > 0 and not deaths)):
        return None
    lease = suggested_lease(e.lease, e.handler_p99, e.handler_max)
    measured = [v for v in (None if e.handler_p99 is None else LEASE_FACTOR * e.handler_p99,
                            e.handler_max) if v is not None]
    if measured and round_up(max(measured)) > e.lease:
        why = (f"the p99 handler time is {_seconds(e.handler_p99)} and the largest "
               f"{_seconds(e.handler_max)} against a lease of {e.lease:g} s; at least "
               f"{LEASE_FACTOR:g} x p99 and never below the largest, rounded up, is "
               f"{lease:g} s")
    else:
        why = ("no handler time measured beyond the lease (a process that stalls and "
               "stops renewing: a handler that holds the GIL, a paused VM); twice the "
               f"lease, rounded up, is {lease:g} s")
    parts = []
    if e.late_acks:
        parts.append(f"{e.late_acks} ack(s) came after their lease ended")
    if unexplained:
        parts.append(f"{unexplained} redelivery(ies) no nack explains")
    return Finding(
        e.queue, "lease_too_short",
        f"lease too short: {', '.join(parts)} in the last {window_text(e.since)}, with "
        + ("no worker death" if not deaths else f"{len(deaths)} worker death(s)"),
        {"late_acks": e.late_acks, "redelivered": e.redelivered, "nacked": e.nacked,
         "nacked_then_dead": e.final_nacks, "redelivered_after_lease": unexplained,
         "worker_deaths": len(deaths),
         "lease": e.lease, "handler_p99": e.handler_p99, "handler_max": e.handler_max,
         "suggested_lease": lease},
        f"Messages were handed out again while a handler still worked on them (two "
        f"handlers on one message). Give the queue a longer lease: {why}. hailq workers "
        "renew leases while a handler runs; consumers of their own should call "
        "message.extend() or queue.extend_many().",
        [shell(f"hailq configure {e.queue} --lease {lease:g}"),
         python(f"broker.configure({e.queue!r}, lease={lease:g})")])


def _seconds(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.3g} s"


# -- duplicate effects --------------------------------------------------------------------

def _duplicates(e: QueueEvidence) -> Finding | None:
    if e.redelivered <= 0 or e.handler_runs <= 0 or e.inbox_runs > 0:
        return None
    return Finding(
        e.queue, "duplicate_effects",
        f"duplicate-effect risk: {e.redelivered} redelivered message(s) in the last "
        f"{window_text(e.since)}, and none of {e.handler_runs} handler runs used an inbox",
        {"redelivered": e.redelivered, "handler_runs": e.handler_runs,
         "inbox_runs": e.inbox_runs},
        "A redelivered message runs its handler again, so whatever the first run did "
        "happens twice (two results, two payments). Record each message id in the same "
        "transaction as the effect: hailq.inbox(conn, consumer).record(message.id) in "
        "the consumer's own database, or message.transaction() when the effect lives in "
        "the broker's database (the effect and the ack commit together, exactly once).",
        [python(f"inbox = hailq.inbox(conn, {e.queue!r})  # conn: your database\n"
                "with conn:  # the effect's transaction\n"
                "    if inbox.record(message.id):  # False: done before, skip it\n"
                "        ...  # the effect"),
         python("with message.transaction() as conn:  # effect and ack commit together\n"
                "    ...  # the effect, in the broker's database")])


def _pool(e: QueueEvidence) -> Finding | None:
    """A queue in deadline order (rule 41) whose running pool is smaller than the one
    that meets every target (``desired_workers``): how many workers it needs."""
    if not e.deadline_order or e.workers_now >= e.desired_workers:
        return None
    needed, per = e.desired_workers, max(e.concurrency, 1)
    if e.pool_reason is None:
        title = (f"pool too small for its targets: {e.workers_now} worker process(es) run, "
                 f"deadline order meets every target with {needed}")
        why = (f"Run {needed} worker process(es) of {per} handler slot(s) (or let "
               "'hailq autoscale' grow to desired_workers): with fewer, some messages "
               "start after their deadline.")
    else:
        title = (f"pool too small for its targets: {e.workers_now} worker process(es) run; "
                 f"no pool meets every target ({e.pool_reason}), {needed} is the largest "
                 "that helps")
        why = (f"Run {needed} worker process(es) of {per} handler slot(s): more would not "
               f"meet more targets. No pool meets them all: {e.pool_reason}.")
    return Finding(
        e.queue, "pool_too_small", title,
        {"workers": e.workers_now, "needed": needed, "concurrency": per,
         "reason": e.pool_reason, "ready": e.ready, "in_flight": e.in_flight},
        why, [shell(f"hailq autoscale TARGET --queue {e.queue} --min {needed} "
                    f"--max {max(needed, 1)} --concurrency {per}")])
