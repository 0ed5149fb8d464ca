"""Rule 26: the pure diagnosis of ``hailq doctor``, with hand-built evidence.

Each of the seed's four mistakes, where its thresholds lie, a healthy queue, and a
rate-limited queue at its limit (issue 24: not saturated).
"""

from __future__ import annotations

from dataclasses import replace

from hailq.models import AttemptError, DeadMessage
from hailq.policy.diagnosis import (
    Finding,
    QueueEvidence,
    SlotPoint,
    Thresholds,
    WorkerSpan,
    diagnose,
    round_up,
    signature,
    suggested_lease,
)

NOW = 10_000.0


def healthy(**changes: object) -> QueueEvidence:
    base = QueueEvidence(
        queue="claims", now=NOW, lease=30.0, max_attempts=5, rate=None, rate_text=None,
        ready=0, backlog=0, in_flight=0, nacked=0, redelivered=0, late_acks=0,
        dead_lettered=0, handler_p99=0.4, handler_runs=500, inbox_runs=0,
        acked_per_second=8.0,
        workers=[WorkerSpan("w1", NOW - 600, NOW - 1, "running", 4)],
        slots=[SlotPoint(NOW - 300 + 10 * i, 80, 20.0) for i in range(29)])
    return replace(base, **changes)  # type: ignore[arg-type]


def dead(n: int, errors: list[str], at: float = NOW - 100) -> DeadMessage:
    return DeadMessage(id=f"m{n}", queue="claims", body={"n": n}, headers={}, priority=0,
                       ordering_key=None, attempt=len(errors), enqueued_at=at - 60,
                       dead_at=at, errors=[AttemptError(i + 1, e, at - 10 * (len(errors) - i))
                                           for i, e in enumerate(errors)])


def kinds(e: QueueEvidence, limits: Thresholds | None = None) -> list[str]:
    return [f.kind for f in diagnose(e, limits or Thresholds()).findings]


def shell(f: Finding) -> list[str]:
    return [s.code for s in f.snippets if s.kind == "shell"]


def python(f: Finding) -> list[str]:
    return [s.code for s in f.snippets if s.kind == "python"]


TRACE = "Traceback (most recent call last):\n  File \"h.py\", line 3\nValueError: corrupt photo"


def test_rule_26_healthy_queue_has_no_finding() -> None:
    d = diagnose(healthy())
    assert d.healthy and d.findings == [] and d.notes == []


def test_rule_26_poison_one_message_failing_every_attempt_with_one_error() -> None:
    d = diagnose(healthy(dead=[dead(1, [TRACE] * 5)], dead_lettered=1, nacked=5,
                         redelivered=4, inbox_runs=10))
    [f] = d.findings
    assert f.kind == "poison"
    group = f.evidence
    assert group["error"] == "ValueError: corrupt photo"
    assert group["dead_letters"] == 1 and group["attempts"] == 5
    assert group["failed_repeatedly"] == 1 and group["message_ids"] == ["m1"]
    assert "hailq dead claims --grep 'ValueError: corrupt photo'" in shell(f)
    assert "hailq show claims m1" in shell(f)
    # The exception named by the error is the one to turn into a dead letter: Python.
    [code] = python(f)
    assert "except ValueError as exc:" in code and "hailq.DeadLetter" in code
    assert "DeadLetter" in f.suggestion and "max_attempts is 5" in f.suggestion


def test_rule_26_poison_dead_letters_sharing_one_error() -> None:
    # Each was dead-lettered at once (one attempt), but three share one error.
    e = healthy(dead=[dead(i, ["schema violation: no claim number"]) for i in range(3)])
    [f] = diagnose(e).findings
    assert f.kind == "poison" and f.evidence["dead_letters"] == 3


def test_rule_26_poison_thresholds() -> None:
    # One dead letter, one attempt: a deliberate DeadLetter, not poison.
    assert kinds(healthy(dead=[dead(1, ["no claim number"])])) == []
    # Two attempts with different errors: nothing repeats.
    assert kinds(healthy(dead=[dead(1, ["timeout talking to X", "ValueError: y"])])) == []
    # Raised thresholds take more.
    strict = Thresholds(poison_attempts=4, poison_group=3)
    assert kinds(healthy(dead=[dead(1, [TRACE] * 3)]), strict) == []
    assert kinds(healthy(dead=[dead(1, [TRACE] * 4)]), strict) == ["poison"]
    # A high max_attempts is worth lowering.
    [f] = diagnose(healthy(max_attempts=50, dead=[dead(1, [TRACE] * 50)])).findings
    assert "hailq configure claims --max-attempts 3" in shell(f)


def test_rule_26_lease_expired_is_poison_only_where_workers_died() -> None:
    attempts = ["lease expired"] * 3
    message = dead(1, attempts)
    # No worker died: the lease ended under living workers -> the lease, not poison.
    e = healthy(dead=[message], redelivered=2, inbox_runs=1)
    assert kinds(e) == ["lease_too_short"]
    # Workers died while holding it (their last heartbeat before each lease end).
    died = [WorkerSpan(f"w{i}", NOW - 900, a.at - 20, "running", 1)
            for i, a in enumerate(message.errors)]
    e = healthy(dead=[message], redelivered=2, inbox_runs=1,
                workers=[*healthy().workers, *died])
    [f] = diagnose(e).findings
    assert f.kind == "poison"
    assert f.evidence["workers_died"] == 3 and python(f) == []
    assert "kills the worker" in f.suggestion


def test_rule_26_lease_too_short_from_late_acks_suggests_lease_from_p99() -> None:
    e = healthy(lease=1.0, late_acks=4, redelivered=4, handler_p99=2.9, inbox_runs=1)
    [f] = diagnose(e).findings
    assert f.kind == "lease_too_short"
    assert f.evidence["late_acks"] == 4 and f.evidence["worker_deaths"] == 0
    assert f.evidence["suggested_lease"] == 10.0  # 3 x 2.9 = 8.7, rounded up
    assert shell(f) == ["hailq configure claims --lease 10"]
    assert python(f) == ["broker.configure('claims', lease=10)"]


def test_rule_26_lease_too_short_from_redeliveries_without_deaths() -> None:
    e = healthy(lease=5.0, redelivered=6, nacked=1, handler_p99=12.0, inbox_runs=1)
    [f] = diagnose(e).findings
    assert f.kind == "lease_too_short"
    assert f.evidence["redelivered_after_lease"] == 5
    assert f.evidence["suggested_lease"] == 45.0  # 3 x 12 = 36 -> 45


def test_rule_26_lease_thresholds() -> None:
    # Redeliveries all explained by nacks (retries): no lease finding.
    assert kinds(healthy(redelivered=3, nacked=3, inbox_runs=1)) == []
    # Redeliveries with a worker that died (SIGKILL): the crash explains them.
    died = WorkerSpan("w9", NOW - 500, NOW - 200, "running", 4)
    assert kinds(healthy(redelivered=3, inbox_runs=1,
                         workers=[*healthy().workers, died])) == []
    # A worker that stopped cleanly is no death.
    stopped = WorkerSpan("w9", NOW - 500, NOW - 200, "stopped", 4)
    assert kinds(healthy(redelivered=3, inbox_runs=1,
                         workers=[*healthy().workers, stopped])) == ["lease_too_short"]
    # A late ack is a lease too short even beside a death (a dead worker acks nothing).
    assert kinds(healthy(late_acks=1, redelivered=1, inbox_runs=1,
                         workers=[*healthy().workers, died])) == ["lease_too_short"]
    # p99 below the lease (the process stalled, or consumers of their own): double it.
    [f] = diagnose(healthy(lease=30.0, late_acks=2, handler_p99=0.4, inbox_runs=1)).findings
    assert f.evidence["suggested_lease"] == 60.0
    [f] = diagnose(healthy(lease=30.0, late_acks=2, handler_p99=None, inbox_runs=1)).findings
    assert f.evidence["suggested_lease"] == 60.0


def test_rule_26_round_up() -> None:
    assert [round_up(v) for v in (0.2, 1.0, 8.7, 36, 301, 50_000)] == \
        [1.0, 1.0, 10.0, 45.0, 450.0, 43200.0]


def test_rule_26_duplicate_effects_without_inbox() -> None:
    e = healthy(redelivered=2, nacked=2)
    [f] = diagnose(e).findings
    assert f.kind == "duplicate_effects"
    assert f.evidence == {"redelivered": 2, "handler_runs": 500, "inbox_runs": 0}
    assert "hailq.inbox" in f.suggestion and "message.transaction()" in f.suggestion
    # Both ways out are lines of Python, never shell commands.
    assert shell(f) == [] and len(python(f)) == 2
    assert python(f)[0].startswith("inbox = hailq.inbox(conn, 'claims')")
    for code in python(f):
        compile(code, "snippet", "exec")  # each one is valid Python


def test_rule_26_duplicate_effects_thresholds() -> None:
    assert kinds(healthy(redelivered=2, nacked=2, inbox_runs=3)) == []  # uses an inbox
    assert kinds(healthy(redelivered=0)) == []  # nothing redelivered
    assert kinds(healthy(redelivered=2, nacked=2, handler_runs=0)) == []  # not measured


def saturating(rate: float | None = None, **changes: object) -> QueueEvidence:
    """One worker of 2 slots for 100 s at 10/s and 0.2 s per message, then three more
    workers: 8 slots, still 10/s, 0.8 s per message (a downstream serving 2 at once)."""
    switch = NOW - 150
    workers = [WorkerSpan("w0", NOW - 400, NOW - 1, "running", 2),
               *(WorkerSpan(f"w{i}", switch, NOW - 1, "running", 2) for i in (1, 2, 3))]
    slots = [SlotPoint(NOW - 300 + 10 * i, 100, 20.0) for i in range(15)] + \
        [SlotPoint(NOW - 150 + 10 * i, 100, 80.0) for i in range(15)]
    return healthy(workers=workers, slots=slots, backlog=900, ready=890, rate=rate,
                   rate_text=None if rate is None else f"{rate:g}/s",
                   acked_per_second=10.0, **changes)


def test_rule_26_saturated_downstream() -> None:
    [f] = diagnose(saturating()).findings
    assert f.kind == "saturated_downstream"
    ev = f.evidence
    assert (ev["slots_before"], ev["slots_after"]) == (2, 8)
    assert ev["throughput_before"] == 10.0 and ev["throughput_after"] == 10.0
    assert ev["handler_time_before"] == 0.2 and ev["handler_time_after"] == 0.8
    assert ev["suggested_rate"] == "10/s"
    assert "about 1 worker process" in f.suggestion
    assert "hailq configure claims --rate 10/s" in shell(f)
    assert "broker.configure('claims', rate='10/s')" in python(f)


def test_rule_26_saturation_thresholds() -> None:
    e = saturating()
    # Throughput rose with the workers: they helped, not saturated.
    grew = [SlotPoint(p.start, p.finished * (4 if p.start >= NOW - 150 else 1),
                      p.handler_seconds * (4 if p.start >= NOW - 150 else 1)) for p in e.slots]
    assert kinds(replace(e, slots=grew)) == []
    # Flat throughput but handler time flat too (arrivals are the limit): not saturated.
    flat = [SlotPoint(p.start, 100, 20.0) for p in e.slots]
    assert kinds(replace(e, slots=flat)) == []
    # No more workers than before: nothing to compare.
    assert kinds(replace(e, workers=e.workers[:1])) == []
    # The growth must reach the capacity threshold.
    assert kinds(e, Thresholds(saturation_capacity=5.0)) == []
    # The incomplete current slot and the slot of the change are left out.
    assert kinds(replace(e, slots=[*e.slots, SlotPoint(NOW - 5, 1, 90.0)])) == \
        ["saturated_downstream"]


def test_rule_26_rate_limited_queue_at_its_limit_is_not_saturated() -> None:
    d = diagnose(saturating(rate=10.0))
    assert d.findings == []
    [note] = d.notes
    assert note.kind == "at_rate_limit" and note.evidence["rate"] == "10/s"
    assert "not a saturated" in note.text.lower()
    # Well under its limit the plateau is the downstream's again.
    assert kinds(saturating(rate=100.0)) == ["saturated_downstream"]
    # At its limit with no backlog: nothing worth saying.
    assert diagnose(healthy(rate=8.0, rate_text="8/s")).notes == []


def test_rule_26_signature_is_the_exception_line() -> None:
    assert signature(TRACE) == "ValueError: corrupt photo"
    assert signature("lease expired") == "lease expired"
    assert signature(None) == "(no error text)"
    assert len(signature("x" * 500)) == 200


# -- issue 33: a doctor that clears ------------------------------------------------------

def test_rule_26_poison_one_finding_per_error_each_with_its_own_suggestion() -> None:
    """Two messages failing again and again with two different errors (the issue's "2 dead
    letter(s) with one error" that listed both and advised on the first only)."""
    timeout = "Traceback (most recent call last):\nTimeoutError: results database"
    e = healthy(dead=[dead(1, [TRACE] * 3), dead(2, [timeout] * 3), dead(3, [TRACE] * 3)])
    first, second = diagnose(e).findings
    assert (first.kind, second.kind) == ("poison", "poison")
    assert (first.evidence["error"], first.evidence["dead_letters"]) == \
        ("ValueError: corrupt photo", 2)
    assert first.evidence["message_ids"] == ["m1", "m3"]
    assert (second.evidence["error"], second.evidence["dead_letters"]) == \
        ("TimeoutError: results database", 1)
    assert "2 dead letter(s) failing with 'ValueError: corrupt photo'" in first.title
    assert "1 dead letter(s) failing with 'TimeoutError: results database'" in second.title
    # Each suggestion speaks of its own error only.
    assert "corrupt photo" in first.suggestion and "TimeoutError" not in first.suggestion
    assert "TimeoutError" in second.suggestion and "corrupt" not in second.suggestion
    assert "hailq dead claims --grep 'TimeoutError: results database'" in shell(second)
    assert "hailq show claims m2" in shell(second)
    assert "except TimeoutError as exc:" in python(second)[0]


def test_rule_26_dead_letters_before_the_window_are_a_note_not_a_finding() -> None:
    old = [dead(i, [TRACE] * 5, at=NOW - 3600) for i in range(3)]
    d = diagnose(healthy(dead=old))  # the default window: 15 minutes
    assert d.healthy and d.findings == []
    [note] = d.notes
    assert note.kind == "earlier_dead_letters"
    assert note.evidence == {"dead_letters": 3, "errors": 1, "last_dead_at": NOW - 3600}
    assert "before the last 15 minutes" in note.text and "1 h ago" in note.text
    # A window that reaches back to them finds them again.
    [f] = diagnose(healthy(dead=old, since=2 * 3600.0)).findings
    assert f.kind == "poison" and f.evidence["dead_letters"] == 3
    assert "in the last 2 hours" in f.suggestion
    # Old and new side by side: the new ones are the finding, the old ones the note.
    d = diagnose(healthy(dead=[*old, dead(9, [TRACE] * 5)]))
    assert [f.evidence["dead_letters"] for f in d.findings] == [1]
    assert [n.evidence["dead_letters"] for n in d.notes] == [3]


def test_rule_26_a_worker_that_died_long_before_the_window_explains_nothing() -> None:
    long_ago = WorkerSpan("w9", NOW - 9000, NOW - 7200, "running", 4)
    # Redeliveries in the window, no nack: the death two hours ago is not their cause.
    assert kinds(healthy(redelivered=3, inbox_runs=1,
                         workers=[*healthy().workers, long_ago])) == ["lease_too_short"]


def test_rule_26_lease_suggestion_never_below_the_largest_handler_time() -> None:
    """The issue's case: a 1 s lease, a handler of 2.5 s whose p99 read low; the lease
    suggested must cover the largest handler time, and 3 x p99."""
    [f] = diagnose(healthy(lease=1.0, late_acks=2, handler_p99=0.6, handler_max=2.5,
                           inbox_runs=1)).findings
    assert f.evidence["suggested_lease"] == 3.0  # max(3 x 0.6, 2.5) = 2.5 -> 3
    assert f.evidence["handler_max"] == 2.5
    [f] = diagnose(healthy(lease=1.0, late_acks=2, handler_p99=2.5, handler_max=2.6,
                           inbox_runs=1)).findings
    assert f.evidence["suggested_lease"] == 10.0  # 3 x 2.5 = 7.5 -> 10
    assert "never below the largest" in f.suggestion
    for p99, largest, lease in [(0.1, 40.0, 30.0), (2.0, 2.1, 1.0), (None, 7.0, 5.0),
                                (0.9, None, 0.5), (100.0, 120.0, 30.0)]:
        suggested = suggested_lease(lease, p99, largest)
        assert suggested >= 3 * (p99 or 0) and suggested >= (largest or 0), (p99, largest)
        assert suggested > lease
