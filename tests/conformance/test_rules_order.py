"""SPEC rules 16-18: priority with and without aging, per-key order, several queues.

Rule 18's weighting is the worker's job and is tested with the worker; here we
test what the broker offers a multi-queue consumer: queues are independent and
each can be drained on its own.
"""

from __future__ import annotations

import time

import pytest

import hailq
from hailq import Envelope

from .helpers import receive_all

# -- rule 16: priority and aging -----------------------------------------------------------


def test_rule_16_strict_priority_serves_higher_priority_first(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    q.send_many([Envelope(f"p{p}-{i}", priority=p)
                 for i, p in enumerate([0, 5, 9, 1, 5, 0, 9])])

    order = [m.body for m in receive_all(q, batch=3)]

    assert order == ["p9-2", "p9-6", "p5-1", "p5-4", "p1-3", "p0-0", "p0-5"]


def test_rule_16_same_priority_is_first_in_first_out(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    ids = [q.send(n, priority=3) for n in range(30)] + q.send_many(
        [Envelope(n, priority=3) for n in range(30, 60)])

    received = [m.id for m in receive_all(q, batch=7)]

    assert received == ids


def test_rule_16_without_aging_old_low_priority_waits_behind_new_high(
        broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    q.send("old low", priority=0)
    time.sleep(0.5)
    q.send("new high", priority=1)

    assert [m.body for m in q.receive(max_messages=2)] == ["new high", "old low"]


def test_rule_16_with_aging_old_low_priority_goes_before_newer_high(broker: hailq.Broker) -> None:
    q = broker.queue("claims", aging=0.2)
    q.send("old low", priority=0)
    time.sleep(0.5)  # more than one level of aging (0.2 s) later
    q.send("new high", priority=1)

    assert [m.body for m in q.receive(max_messages=2)] == ["old low", "new high"]


def test_rule_16_with_aging_higher_priority_still_wins_within_the_aging_step(
        broker: hailq.Broker) -> None:
    q = broker.queue("claims", aging=5)
    q.send("low", priority=0)
    q.send("high", priority=1)  # available well within 5 s of "low"

    assert [m.body for m in q.receive(max_messages=2)] == ["high", "low"]


def test_rule_16_with_aging_each_level_is_worth_aging_seconds(broker: hailq.Broker) -> None:
    q = broker.queue("claims", aging=0.1)
    q.send("old p0", priority=0)
    time.sleep(0.45)  # more than 3 levels * 0.1 s
    q.send("new p3", priority=3)
    q.send("new p9", priority=9)  # 9 levels * 0.1 s = 0.9 s: still ahead of "old p0"

    assert [m.body for m in q.receive(max_messages=3)] == ["new p9", "old p0", "new p3"]


def test_rule_16_equal_priority_with_aging_stays_fifo(broker: hailq.Broker) -> None:
    q = broker.queue("claims", aging=0.2)
    ids = q.send_many([Envelope(n, priority=4) for n in range(20)])

    assert [m.id for m in receive_all(q, batch=6)] == ids


@pytest.mark.parametrize(("before", "after", "expected"), [
    # Under the new setting the p1 message sent after the change goes between them.
    (None, 1000.0, ["old-p9", "new-p1", "old-p0"]),
    (1.0, 1000.0, ["old-p9", "new-p1", "old-p0"]),
    # Back to strict priority: plain priority order, whenever a message was sent.
    (60.0, None, ["old-p9", "new-p1", "old-p0"]),
], ids=["strict-to-aging", "aging-changed", "aging-to-strict"])
def test_rule_16_changing_aging_reorders_the_messages_already_queued(
        broker: hailq.Broker, before: float | None, after: float | None,
        expected: list[str]) -> None:
    q = broker.queue("claims", aging=before)
    q.send("old-p0", priority=0)
    q.send("old-p9", priority=9)

    q = broker.queue("claims", aging=after)
    q.send("new-p1", priority=1)

    assert [m.body for m in receive_all(q, batch=2)] == expected


# -- rule 17: per-key order --------------------------------------------------------------------


def test_rule_17_same_key_is_delivered_in_send_order_one_at_a_time(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    ids = q.send_many([Envelope(f"event {n}", ordering_key="policy-17") for n in range(4)])

    delivered = []
    while batch := q.receive(max_messages=10):
        assert len(batch) == 1, "two messages of one key were leased at once"
        delivered.append(batch[0].id)
        batch[0].ack()

    assert delivered == ids


def test_rule_17_next_of_a_key_waits_while_the_head_is_retried(broker: hailq.Broker) -> None:
    q = broker.queue("claims", lease=0.2)
    first, _ = q.send_many([Envelope("first", ordering_key="k"),
                            Envelope("second", ordering_key="k")])
    (head,) = q.receive(max_messages=10)
    head.nack(delay=0.3)

    assert q.receive(max_messages=10) == []
    time.sleep(0.35)
    (again,) = q.receive(max_messages=10)
    assert (again.id, again.attempt) == (first, 2)
    time.sleep(0.3)  # its lease ends: the head comes back, never the second
    assert [m.id for m in q.receive(max_messages=10)] == [first]


def test_rule_17_keys_do_not_hold_back_unkeyed_messages(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    q.send_many([Envelope("k1", ordering_key="k"), Envelope("k2", ordering_key="k"),
                 Envelope("free 1"), Envelope("free 2")])

    assert sorted(m.body for m in q.receive(max_messages=10)) == ["free 1", "free 2", "k1"]


def test_rule_17_different_keys_flow_in_parallel(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    q.send_many([Envelope(f"{key}-{n}", ordering_key=key)
                 for n in range(3) for key in ("a", "b", "c", "d")])

    heads = q.receive(max_messages=20)

    assert sorted(m.body for m in heads) == ["a-0", "b-0", "c-0", "d-0"]
    assert q.stats().blocked == 8


def test_rule_17_acking_the_heads_of_one_claim_together_frees_each_key(
        broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    q.send_many([Envelope(f"{key}-{n}", ordering_key=key)
                 for n in range(2) for key in ("a", "b", "c")] + [Envelope("free")])
    heads = q.receive(max_messages=10)
    assert sorted(m.body for m in heads) == ["a-0", "b-0", "c-0", "free"]

    assert q.ack_many(heads) == [False] * 4

    assert sorted(m.body for m in q.receive(max_messages=10)) == ["a-1", "b-1", "c-1"]
    assert q.stats().blocked == 0


def test_rule_17_continue_lets_the_key_flow_after_its_head_dies(broker: hailq.Broker) -> None:
    q = broker.queue("claims", on_dead="continue", max_attempts=1)
    q.send_many([Envelope("head", ordering_key="acct-1"), Envelope("next", ordering_key="acct-1")])

    (head,) = q.receive(max_messages=10)
    head.nack(delay=0, error="broken")

    assert [m.body for m in q.receive(max_messages=10)] == ["next"]
    assert q.stats().parked_keys == []


def test_rule_17_park_holds_the_key_until_redrive(broker: hailq.Broker) -> None:
    q = broker.queue("claims", on_dead="park")
    ids = q.send_many([Envelope(n, ordering_key="acct-1") for n in range(3)]
                      + [Envelope("other key", ordering_key="acct-2")])
    received = q.receive(max_messages=10)
    assert sorted(str(m.body) for m in received) == ["0", "other key"]
    (head,) = [m for m in received if m.body == 0]
    head.dead_letter("broken")

    assert q.receive(max_messages=10) == []
    assert q.stats().parked_keys == ["acct-1"]
    assert q.dead_letters()[0].parked

    assert q.redrive() == 1
    assert q.stats().parked_keys == []
    delivered = []
    while batch := q.receive(max_messages=10):
        assert len(batch) == 1
        delivered.append(batch[0].id)
        batch[0].ack()
    assert delivered == ids[:3]


def test_rule_17_park_holds_the_key_until_the_head_is_purged(broker: hailq.Broker) -> None:
    q = broker.queue("claims", on_dead="park", max_attempts=1, lease=0.2)
    q.send_many([Envelope("head", ordering_key="acct-1"), Envelope("next", ordering_key="acct-1")])
    q.receive()  # the consumer dies: the lease ends on the last attempt
    time.sleep(0.3)

    assert q.receive(max_messages=10) == []
    assert q.stats().parked_keys == ["acct-1"]

    assert q.purge(dead=True) == 1
    assert q.stats().parked_keys == []
    assert [m.body for m in q.receive(max_messages=10)] == ["next"]


def test_rule_17_new_messages_of_a_parked_key_wait_too(broker: hailq.Broker) -> None:
    q = broker.queue("claims", on_dead="park")
    q.send("head", ordering_key="acct-1")
    q.receive()[0].dead_letter("broken")

    q.send("sent after the head died", ordering_key="acct-1")

    assert q.receive(max_messages=10) == []
    assert q.stats().parked_keys == ["acct-1"]


def test_rule_17_ten_thousand_keys_all_flow(broker: hailq.Broker) -> None:
    q = broker.queue("claims", lease=300)
    q.send_many([Envelope(n, ordering_key=f"policy-{n}") for n in range(10_000)])

    received = receive_all(q, batch=1000)

    assert sorted(m.body for m in received) == list(range(10_000))
    assert len({m.ordering_key for m in received}) == 10_000
    for start in range(0, 10_000, 1000):
        assert q.ack_many(received[start:start + 1000]) == [False] * 1000
    assert q.stats().acked == 10_000


# -- rule 18: several queues -------------------------------------------------------------------


def test_rule_18_queues_are_independent_so_a_consumer_can_drain_them_in_order(
        broker: hailq.Broker) -> None:
    high = broker.queue("claims.high")
    low = broker.queue("claims.low")
    low.send_many(["low 1", "low 2"])
    high.send_many(["high 1", "high 2"])

    drained = []
    for q in (high, low):  # strict order: drain the first, then the next
        while batch := q.receive():
            drained.append(batch[0].body)
            batch[0].ack()

    assert drained == ["high 1", "high 2", "low 1", "low 2"]
    assert (high.stats().acked, low.stats().acked) == (2, 2)
