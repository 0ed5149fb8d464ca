"""The doctor's window (rules 26, 36) at the storage seam: ``figures_window`` returns the
rate slots of a queue since a time, with redeliveries and inbox runs, on every backend;
slots are kept a day and pruned in bounded statements."""

from __future__ import annotations

import time

import psycopg
import pytest

import hailq
from hailq.backends.base import FiguresRecordParams, FiguresWindowParams, RateAdd, RateSlot
from hailq.backends.base_parts import PruneParams
from hailq.errors import QueueNotFound
from hailq.url import parse_url


def test_rule_26_a_window_has_claims_redeliveries_breaches_and_inbox_runs(
        broker: hailq.Broker) -> None:
    q = broker.queue("jobs", slo={9: 0.0001}, max_attempts=5)
    since = broker.now()
    q.send("a", priority=9)
    q.send("b")
    first = q.receive(2)
    for m in first:
        m.nack(delay=0)  # a failure: both come back on attempt 2
    again = q.receive(2)
    assert sorted(m.attempt for m in again) == [2, 2]
    for m in again:
        with m.transaction():  # an ack transaction: an inbox run (rule 26)
            pass
    assert broker.figures is not None
    broker.figures.flush()
    slots = broker.backend.figures_window(FiguresWindowParams("jobs", since))
    assert slots and all(isinstance(s, RateSlot) for s in slots)
    assert all(s.slot % 10 == 0 and since - 10 < s.slot <= broker.now() for s in slots)

    def total(p: int, counter: str) -> float:  # a counter summed over the slots
        return sum(getattr(s, counter) for s in slots if s.priority == p)

    for p in (0, 9):
        assert [total(p, c) for c in ("started", "acked", "failed")] == [2, 1, 1]
        assert [total(p, c) for c in ("redelivered", "inbox")] == [1, 1]
        assert total(p, "late_acks") == 0  # an ack transaction within its lease is in time
        assert total(p, "handler_total") > 0
    assert total(9, "breaches") == 2 and total(0, "breaches") == 0  # 0 has no target
    assert broker.backend.figures_window(FiguresWindowParams("jobs", broker.now() + 60)) == []
    with pytest.raises(QueueNotFound):
        broker.backend.figures_window(FiguresWindowParams("nope", since))


def test_rule_26_rate_slots_are_kept_a_day_and_pruned_past_it(sqlite_url: str) -> None:
    clock = [time.time() - 2 * 86400]  # two days ago, then now
    b = hailq.connect(sqlite_url, clock=lambda: clock[0])
    try:
        b.queue("jobs")
        row = RateAdd(queue="jobs", priority=0, started=1, acked=1, handler_total=0.5)
        for at in (clock[0], time.time() - 86400 + 120, time.time() - 3 * 3600):
            clock[0] = at  # a slot two days ago, one just inside the day, one 3 h ago
            b.backend.figures_record(FiguresRecordParams(rates=[row]))
        clock[0] = time.time()
        b.backend.figures_record(FiguresRecordParams(rates=[row]))
        b.backend.maintenance_prune(PruneParams("figures"))
        kept = b.backend.figures_window(FiguresWindowParams("jobs", 0.0))
        assert len(kept) == 3  # the one two days old went, the one a day old stays
        assert min(s.slot for s in kept) > time.time() - 86400
    finally:
        b.close()


def test_rule_26_pruning_is_bounded_and_catches_up_on_postgres(
        pg_url: str) -> None:
    b = hailq.connect(pg_url)
    try:
        b.queue("jobs")
        schema = parse_url(pg_url).options["schema"]
        old = int(time.time() // 10) - 9000  # 25 hours ago
        with psycopg.connect(parse_url(pg_url).target, autocommit=True) as conn:
            conn.execute(f'INSERT INTO "{schema}".rates (queue, slot, priority, started) '
                         "SELECT 'jobs', %s - g, 0, 1 FROM generate_series(0, 24) AS g",
                         (old,))
        b.backend.figures_record(FiguresRecordParams(
            rates=[RateAdd(queue="jobs", priority=0, started=1)]))
        # Three statements of 10 rows for 25 rows.
        assert b.backend.maintenance_prune(PruneParams("figures", limit=10)) == 25
        kept = b.backend.figures_window(FiguresWindowParams("jobs", 0.0))
        assert [s.started for s in kept] == [1]
    finally:
        b.close()
