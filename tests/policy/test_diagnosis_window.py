"""Rules 26 and 36: the doctor's evidence over its window, from stored slot rows.

``evidence_of`` with hand-built figures and ``RateSlot`` rows as ``figures_window``
returns them: what falls inside the window counts, what lies before it does not, a
nack just before the window explains its redelivery inside it, and the last attempt
of a message that died explains none.
"""

from __future__ import annotations

from hailq.backends.base import RateSlot
from hailq.models import AttemptError, DeadMessage, QueueStats
from hailq.observe.figures import QueueFigures, Rates
from hailq.policy.diagnosis import diagnose, evidence_of, reach
from hailq.settings import QueueSettings

NOW = 1_800_000_000.0  # a multiple of 10: slots start on it


def figures(late_acks: int = 0, **settings: object) -> QueueFigures:
    stats = QueueStats(queue="billing", ready=0, scheduled=0, in_flight=0, blocked=0, dead=0,
                       oldest_ready_age=None, sent=100, acked=90, nacked=40, redelivered=40,
                       dead_lettered=0, late_acks=late_acks)
    return QueueFigures(queue="billing", at=NOW, stats=stats,
                        settings=QueueSettings(**settings),  # type: ignore[arg-type]
                        rates=Rates(None, None, None, None, None, None), priorities=[],
                        workers=0, concurrency=1, handler_time=None, desired_workers=0,
                        handler_p99=0.2, handler_max=0.3, handler_p99_1h=0.5,
                        handler_max_1h=4.0)


def slot(ago: float, *, acked: int = 0, failed: int = 0, redelivered: int = 0,
         inbox: int = 0, late_acks: int = 0) -> RateSlot:
    return RateSlot(slot=NOW - ago, priority=0, started=acked + failed, acked=acked,
                    failed=failed, breaches=0, handler_total=0.1 * (acked + failed),
                    redelivered=redelivered, inbox=inbox, late_acks=late_acks)


def dead(ago: float, error: str = "ValueError: x") -> DeadMessage:
    return DeadMessage(id=f"m{ago:g}", queue="billing", body={}, headers={}, priority=0,
                       ordering_key=None, attempt=1, enqueued_at=NOW - ago - 5,
                       dead_at=NOW - ago, errors=[AttemptError(1, error, NOW - ago)])


def test_rule_26_36_only_the_window_counts() -> None:
    """An hour ago: retries, redeliveries, no inbox. Since: clean runs. Healthy."""
    window = [slot(3600, acked=5, failed=5, redelivered=8), slot(3590, acked=3, redelivered=3),
              *(slot(600 - 10 * i, acked=10) for i in range(30))]
    e = evidence_of(figures(), [], [], window=window)
    assert (e.redelivered, e.handler_runs, e.inbox_runs) == (0, 300, 0)
    assert e.nacked == 0  # nacks count from one retry backoff (5 min) before the window
    assert diagnose(e).healthy
    # The same figures inside the window: redeliveries no nack explains, no inbox.
    e = evidence_of(figures(), [], [], since=2 * 3600.0, window=window)
    assert (e.redelivered, e.nacked, e.handler_runs) == (11, 5, 313)
    assert [f.kind for f in diagnose(e).findings] == ["lease_too_short", "duplicate_effects"]


def test_rule_26_36_a_nack_just_before_the_window_explains_its_redelivery() -> None:
    f = figures(retry={"base": 1, "max": 120})
    assert reach(f, 900.0) == NOW - 900 - 120
    window = [slot(905, failed=2), slot(890, acked=2, redelivered=2, inbox=2)]
    e = evidence_of(f, [], [], window=window)
    assert (e.redelivered, e.nacked) == (2, 2)
    assert diagnose(e).healthy  # the retries of two nacks, to a handler with an inbox


def test_rule_26_36_the_last_nack_of_a_message_that_died_explains_no_redelivery() -> None:
    # Two messages nacked twice each; both died at their second nack: two redeliveries,
    # four nacks, but only two nacks were followed by a retry. One more redelivery came
    # after an ended lease.
    window = [slot(60, failed=2, redelivered=0, inbox=2), slot(50, failed=2, redelivered=3,
                                                             inbox=2)]
    dead_letters = [dead(50, "ValueError: x"), dead(50, "ValueError: y")]
    e = evidence_of(figures(), dead_letters, [], window=window)
    assert (e.nacked, e.final_nacks, e.redelivered) == (4, 2, 3)
    [f] = [f for f in diagnose(e).findings if f.kind == "lease_too_short"]
    assert f.evidence["redelivered_after_lease"] == 1
    assert f.evidence["nacked_then_dead"] == 2
    # A death by an ended lease followed no nack.
    e = evidence_of(figures(), [dead(50, "lease expired")], [], window=window)
    assert e.final_nacks == 0


def test_rule_26_36_handler_times_of_the_window_or_the_last_hour() -> None:
    e = evidence_of(figures(), [], [], since=300.0, window=[])
    assert (e.handler_p99, e.handler_max) == (0.2, 0.3)  # the figures' 5-minute window
    e = evidence_of(figures(), [], [], window=[])  # 15 minutes: the last hour holds it
    assert (e.handler_p99, e.handler_max) == (0.5, 4.0)


def test_rule_26_36_late_acks_before_the_window_make_no_finding() -> None:
    # The queue's all-time total says 3; the window's slots hold none of them.
    d = diagnose(evidence_of(figures(late_acks=3), [], [], window=[slot(100, acked=5)]))
    assert d.healthy and d.notes == []
    d = diagnose(evidence_of(figures(late_acks=3), [], [],
                             window=[slot(100, acked=5, late_acks=2)]))
    assert [f.kind for f in d.findings] == ["lease_too_short"]
