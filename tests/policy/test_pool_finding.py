"""``hailq doctor``'s ``pool_too_small`` (rule 41), the pure part: a queue in deadline
order that runs fewer workers than its targets need."""

from __future__ import annotations

from hailq.policy.diagnosis import diagnose
from hailq.policy.findings import QueueEvidence


def evidence(**changes: object) -> QueueEvidence:
    base: dict[str, object] = {
        "queue": "claims", "now": 10_000.0, "lease": 30.0, "max_attempts": 5, "rate": None,
        "rate_text": None, "ready": 300, "backlog": 300, "in_flight": 4, "nacked": 0,
        "redelivered": 0, "late_acks": 0, "dead_lettered": 0, "handler_p99": 1.0,
        "handler_runs": 100, "inbox_runs": 0, "acked_per_second": 4.0,
        "deadline_order": True, "workers_now": 2, "concurrency": 2, "desired_workers": 6}
    return QueueEvidence(**{**base, **changes})  # type: ignore[arg-type]


def kinds(e: QueueEvidence) -> list[str]:
    return [f.kind for f in diagnose(e).findings]


def test_a_deadline_queue_with_fewer_workers_than_needed_is_named_with_the_number() -> None:
    (finding,) = diagnose(evidence()).findings
    assert finding.kind == "pool_too_small"
    assert finding.evidence["needed"] == 6 and finding.evidence["workers"] == 2
    assert "meets every target with 6" in finding.title
    assert "--min 6 --max 6 --concurrency 2" in finding.snippets[0].code


def test_enough_workers_or_priority_order_make_no_finding() -> None:
    assert kinds(evidence(workers_now=6)) == []
    assert kinds(evidence(workers_now=9)) == []
    assert kinds(evidence(deadline_order=False)) == []


def test_where_no_pool_meets_every_target_it_says_why() -> None:
    (finding,) = diagnose(evidence(pool_reason="late: 3 ready message(s) already past "
                                               "their deadline")).findings
    assert "no pool meets every target (late: 3" in finding.title
    assert finding.evidence["reason"].startswith("late: 3")
