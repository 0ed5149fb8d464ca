"""Rule 30's reads: stats, peek and dead letters show the computed truth and write nothing.

An ended lease reads as ready again (or dead after its last attempt, rule 13)
before any upkeep ran, the same as after; the rows in the database stay as
they were. Plus the defects found beside them: a stale receipt in a batch of
extends, and one meaning of ``purge``.
"""

from __future__ import annotations

import pytest

import hailq

from .helpers import RawDatabase, advance


def _states(raw: RawDatabase) -> list[tuple[str, str]]:
    return sorted(raw.execute(f"SELECT id, state FROM {raw.table('messages')}")
                  if not raw.is_sqlite else
                  raw.execute("SELECT id, state FROM hailq_messages"))


def test_rule_30_reads_show_an_ended_lease_as_ready_and_write_nothing(
        broker: hailq.Broker, raw: RawDatabase) -> None:
    q = broker.queue("reads", lease=0.3, max_attempts=3)
    sent = q.send({"n": 1})
    [m] = q.receive()
    advance(broker, 0.5)
    before = _states(raw)
    assert before == [(sent, "leased")]

    [peeked] = q.peek()
    assert (peeked.id, peeked.state) == (sent, "ready")
    stats = q.stats()
    assert (stats.ready, stats.in_flight, stats.dead) == (1, 0, 0)
    assert stats.oldest_ready_age is not None
    assert q.dead_letters() == []
    assert _states(raw) == before  # nothing was written by the looks

    # The next receive does the upkeep and sees what the reads said.
    [again] = q.receive()
    assert again.id == sent and again.attempt == 2
    with pytest.raises(hailq.LeaseLost):
        m.ack()


def test_rule_30_an_ended_last_lease_reads_as_dead_before_and_after_upkeep(
        broker: hailq.Broker, raw: RawDatabase) -> None:
    q = broker.queue("reads-dead", lease=0.3, max_attempts=1, on_dead="park")
    sent = q.send({"n": 1}, ordering_key="claim-7")
    q.send({"n": 2}, ordering_key="claim-7")
    q.receive()
    advance(broker, 0.5)

    assert q.peek()[0].state == "blocked"  # the dead head still holds its key (park)
    assert sent not in [p.id for p in q.peek()]
    stats = q.stats()
    assert (stats.ready, stats.in_flight, stats.dead, stats.dead_lettered) == (0, 0, 1, 1)
    assert stats.parked_keys == ["claim-7"]
    [dead] = q.dead_letters(error_contains="lease expired")
    assert dead.id == sent and dead.last_error == "lease expired" and dead.parked
    assert (sent, "leased") in _states(raw)  # still unmarked in the database

    broker.maintain()
    assert (sent, "dead") in _states(raw)
    [after] = q.dead_letters()
    assert after.dead_at == pytest.approx(dead.dead_at)
    assert [e.error for e in after.errors] == [e.error for e in dead.errors]
    assert q.stats().dead_lettered == 1  # counted once, not again by the upkeep


def test_rule_09_extend_many_answers_each_receipt_not_each_message(
        broker: hailq.Broker) -> None:
    q = broker.queue("extend-stale", lease=0.3)
    q.send({"n": 1})
    [old] = q.receive()
    stale = old.receipt
    advance(broker, 0.5)
    [new] = q.receive()
    assert new.id == old.id
    results = q.extend_many([stale, new.receipt], 30)
    assert results[0] is None
    assert results[1] is not None
    assert q.extend_many([stale], 30) == [None]


def test_purge_deletes_live_messages_by_default_and_dead_ones_when_asked(
        broker: hailq.Broker) -> None:
    q = broker.queue("purge-meaning", max_attempts=1)
    q.send_many([{"n": n} for n in range(3)])
    [m] = q.receive()
    m.nack(error="broken")
    assert q.stats().dead == 1
    assert q.purge() == 2  # the live ones, as hailq purge QUEUE
    stats = q.stats()
    assert (stats.backlog, stats.dead) == (0, 1)
    assert q.purge(dead=True) == 1
    assert q.stats().dead == 0
