"""Rates over one span (rule 36): sent, acked and dead-lettered per second of a window
are taken between the same two points in time, so they compare; a queue younger than
the window says over how long its rates were taken (``span_*``); ``desired_workers``
takes its arrival rate from the same-span sent rate, in Python and in PostgreSQL's view."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import hailq
from hailq.url import parse_url


def drain(q: hailq.Queue) -> int:
    done = 0
    while batch := q.receive(100):
        done += sum(r is not None for r in q.ack_many(batch))
    return done


def test_rule_36_three_hundred_sends_drained_at_once_read_one_rate(
        clocked: tuple[hailq.Broker, Any]) -> None:
    """The issue's case: 300 sends drained at once read sent 55/s beside acked 5/s."""
    broker, advance = clocked
    q = broker.queue("claims")
    for start in range(0, 300, 100):
        q.send_many(list(range(start, start + 100)))
    assert drain(q) == 300
    advance(1.1)  # the scenario: rates are not taken over less than a second
    assert broker.figures is not None
    broker.figures.flush()
    f = q.figures()
    r = f.rates
    assert f.stats.sent == f.stats.acked == 300
    assert r.span_1m is not None and 1.0 <= r.span_1m < 60.0  # younger than the window
    assert r.sent_1m == pytest.approx(300 / r.span_1m, rel=0.05)
    assert r.acked_1m == pytest.approx(r.sent_1m, rel=0.10)
    assert r.span_5m == pytest.approx(r.span_1m, abs=1.0) and r.dead_lettered_1m == 0


def test_rule_36_steady_sends_and_acks_read_within_ten_percent_from_the_first_minute(
        sqlite_url: str) -> None:
    """Ten sends and ten acks a second for three minutes (an injected clock; the broker's
    recorder flushed each second as its thread does): from the first minute on, every
    reading of the last minute's sent and acked rates agrees within 10 %."""
    clock = [1_800_000_000.0]
    b = hailq.connect(sqlite_url, clock=lambda: clock[0])
    try:
        q = b.queue("steady")
        assert b.figures is not None
        readings = []
        for tick in range(1800):  # 0.1 s each
            clock[0] += 0.1
            q.send({"tick": tick})
            for m in q.receive(1):
                m.ack()
            if tick % 10 == 9:
                b.figures.flush()
            if tick >= 600 and tick % 50 == 0:
                readings.append(q.figures().rates)
        for r in readings:
            assert r.span_1m == 60.0
            assert r.sent_1m == pytest.approx(10.0, rel=0.05)
            assert r.acked_1m == pytest.approx(r.sent_1m, rel=0.10)
            assert r.acked_5m == pytest.approx(r.sent_5m, rel=0.10)
    finally:
        b.close()


def test_rule_36_a_burst_after_a_quiet_spell_is_taken_over_the_whole_window(
        sqlite_url: str) -> None:
    """Nobody sampled the queue for ten minutes: its counters held still, so a burst now
    is 120 in the last minute, not 120 over the second since the first sample."""
    clock = [1_800_000_000.0]
    b = hailq.connect(sqlite_url, clock=lambda: clock[0])
    try:
        q = b.queue("bursty")
        q.send("first")
        drain(q)
        assert b.figures is not None
        b.figures.flush()  # samples: 1 sent, 1 acked
        clock[0] += 600.0
        for _ in range(2):
            q.send_many(list(range(60)))
            drain(q)
            clock[0] += 1.0
            b.figures.flush()
        r = q.figures().rates
        assert (r.span_1m, r.span_5m) == (60.0, 300.0)
        assert r.sent_1m == pytest.approx(2.0) and r.acked_1m == pytest.approx(2.0)
        assert r.sent_5m == pytest.approx(120 / 300) and r.acked_5m == pytest.approx(120 / 300)
        assert r.span_1h == pytest.approx(602.0, abs=0.01)  # made 602 s ago
        assert r.sent_1h == pytest.approx(121 / 602, rel=0.01)
    finally:
        b.close()


@pytest.mark.postgres
def test_rule_36_desired_workers_takes_the_same_span_arrival_rate_in_postgresql(
        pg_url: str) -> None:
    b = hailq.connect(pg_url)
    try:
        q = b.queue("claims")
        target = parse_url(pg_url)
        schema = target.options["schema"]
        with psycopg.connect(target.target, autocommit=True) as conn:
            # made ten minutes ago, sampled (nothing sent) two minutes ago
            conn.execute(f'UPDATE "{schema}".queues SET created_at = created_at - 600')
            conn.execute(f'INSERT INTO "{schema}".samples (queue, slot, at, sent, '
                         "dead_lettered, acked) SELECT 'claims', floor(e - 120), e - 120, "
                         f'0, 0, 0 FROM (SELECT "{schema}".epoch() AS e) AS t')
            q.send_many(list(range(30)))
            rate = conn.execute(f'SELECT arrival_rate FROM "{schema}".desired_workers '
                                "WHERE queue = 'claims'").fetchone()
        f = q.figures()
        assert rate is not None and rate[0] == pytest.approx(30 / 60)
        assert f.rates.sent_1m == pytest.approx(rate[0]) and f.rates.span_1m == 60.0
    finally:
        b.close()
