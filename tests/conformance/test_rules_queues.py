"""SPEC rules 1-5: queues, messages, sending, transactional enqueue, dedup, delays."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

import hailq
from hailq import Envelope, InvalidArgument

from .helpers import RawDatabase, advance, receive_all

# -- rule 1: queues and their settings ---------------------------------------------------


def test_rule_01_queue_is_declared_with_the_documented_defaults(broker: hailq.Broker) -> None:
    claims = broker.queue("claims")

    s = claims.settings
    assert (s.lease, s.max_attempts, s.aging) == (30.0, 5, None)
    assert (s.retry.base, s.retry.factor, s.retry.max) == (1.0, 2.0, 300.0)
    assert 0 < s.retry.jitter <= 1
    assert s.dedup_window == 3600.0
    assert s.max_message_size == 1024 * 1024
    assert s.max_in_flight is None
    assert s.on_dead == "continue"
    assert [q.name for q in broker.queues()] == ["claims"]


def test_rule_01_declaring_again_updates_only_the_given_settings(
        broker: hailq.Broker, url: str) -> None:
    broker.queue("claims", lease=300, max_attempts=7)

    updated = broker.queue("claims", lease=60)

    assert updated.settings.lease == 60.0
    assert updated.settings.max_attempts == 7
    with hailq.connect(url) as elsewhere:
        stored = elsewhere.get_queue("claims").settings
    assert (stored.lease, stored.max_attempts) == (60.0, 7)
    assert [q.name for q in broker.queues()] == ["claims"]


def test_rule_01_unknown_queues_and_topics_are_named_errors_and_write_nothing(
        broker: hailq.Broker) -> None:
    with pytest.raises(hailq.QueueNotFound, match="no queue named 'claims'"):
        broker.get_queue("claims")
    with pytest.raises(hailq.TopicNotFound, match="no topic named 'claims'"):
        broker.get_topic("claims")

    assert broker.queues() == [] and broker.topics() == []
    # Siblings under one parent: a missing topic is no missing queue.
    assert not issubclass(hailq.TopicNotFound, hailq.QueueNotFound)
    assert all(issubclass(e, hailq.NotFound) for e in (
        hailq.QueueNotFound, hailq.TopicNotFound, hailq.SubscriptionNotFound,
        hailq.ScheduleNotFound))


def test_rule_01_durations_may_be_given_as_timedelta(broker: hailq.Broker) -> None:
    q = broker.queue("claims", lease=timedelta(minutes=5), aging=timedelta(milliseconds=250),
                     dedup_window=timedelta(hours=2), retry={"base": timedelta(seconds=3)})

    assert q.settings.lease == 300.0
    assert q.settings.aging == 0.25
    assert q.settings.dedup_window == 7200.0
    assert q.settings.retry.base == 3.0

    q.send("late", delay=timedelta(milliseconds=300))
    assert q.receive() == []
    advance(broker, 0.4)
    (msg,) = q.receive(lease=timedelta(seconds=20))
    assert 19 < msg.lease_until - time.time() <= 21
    msg.extend(timedelta(seconds=40))
    assert 39 < msg.lease_until - time.time() <= 41
    msg.nack(delay=timedelta(0))
    assert [m.body for m in q.receive()] == ["late"]


def test_rule_01_names_at_the_edges_of_the_pattern_are_accepted(broker: hailq.Broker) -> None:
    names = ["a", "7", "A" * 128, "claims.v2:eu-west_1"]

    for name in names:
        broker.queue(name).send(name)

    assert sorted(q.name for q in broker.queues()) == sorted(names)
    for name in names:
        assert [m.body for m in broker.get_queue(name).receive()] == [name]


def test_rule_01_max_in_flight_caps_leased_messages_across_consumers(
        broker: hailq.Broker, url: str) -> None:
    results_db_guard = broker.queue("claims", max_in_flight=3)
    results_db_guard.send_many(range(10))

    first = results_db_guard.receive(max_messages=10)
    with hailq.connect(url) as other_worker:
        assert other_worker.queue("claims").receive(max_messages=10) == []
    assert len(first) == 3
    assert results_db_guard.stats().in_flight == 3

    first[0].ack()
    assert len(results_db_guard.receive(max_messages=10)) == 1
    assert results_db_guard.receive(max_messages=10) == []
    assert results_db_guard.stats().in_flight == 3


def test_rule_01_max_in_flight_frees_slots_when_leases_end(broker: hailq.Broker) -> None:
    q = broker.queue("claims", max_in_flight=2, lease=0.2)
    q.send_many(["a", "b", "c"])
    assert len(q.receive(max_messages=3)) == 2

    advance(broker, 0.3)

    again = q.receive(max_messages=3)
    assert len(again) == 2
    assert q.stats().in_flight == 2



@pytest.mark.parametrize("settle", ["ack", "nack", "ack_and_receive"])
def test_rule_01_a_receiver_waiting_on_max_in_flight_wakes_when_a_slot_frees(
        broker: hailq.Broker, url: str, settle: str) -> None:
    """The freed slot must wake the waiter itself: on PostgreSQL its fallback poll is
    longer than its wait, so only a wake-up for the room made can return it in time."""
    q = broker.queue("claims", max_in_flight=1, lease=60)
    q.send_many(["first", "second"])
    (held,) = q.receive()
    consumer_url = url if url.startswith("sqlite") else f"{url}&poll_interval=60"
    got: list[tuple[list[hailq.Message], float]] = []
    with hailq.connect(consumer_url) as consumer:
        waiting = consumer.get_queue("claims")
        thread = threading.Thread(target=lambda: got.append(
            (waiting.receive(wait=30), time.monotonic())))
        thread.start()
        time.sleep(1.0)  # about time: no event says the consumer is waiting on the cap
        assert not got
        freed = time.monotonic()
        if settle == "ack":
            held.ack()
        elif settle == "nack":
            held.nack(delay=120, error="later")
        else:  # the worker's path: ack what is done, lease from another queue
            results, received = broker.queue("other").ack_and_receive([held])
            assert (results, received) == ([False], [])  # False: acked in time
        thread.join(40)
    (received, at), = got
    assert [m.body for m in received] == ["second"]
    assert at - freed < 10, f"woke {at - freed:.1f} s after the slot freed"

# -- rule 2: send and send_many ------------------------------------------------------------


def test_rule_02_send_returns_the_id_of_a_durable_message(broker: hailq.Broker, url: str) -> None:
    q = broker.queue("claims")

    sent = q.send({"claim": 8311}, priority=4, ordering_key="policy-17",
                  headers={"source": "upload"})

    with hailq.connect(url) as after_restart:
        (msg,) = after_restart.queue("claims").receive()
    assert msg.id == sent
    assert msg.body == {"claim": 8311}
    assert msg.headers == {"source": "upload"}
    assert (msg.priority, msg.ordering_key, msg.attempt) == (4, "policy-17", 1)
    assert msg.enqueued_at == pytest.approx(time.time(), abs=30)
    assert q.stats().sent == 1


def test_rule_02_ids_are_unique_and_time_ordered(broker: hailq.Broker) -> None:
    q = broker.queue("claims")

    ids = [q.send(i) for i in range(50)] + q.send_many(range(50, 100))

    assert len(set(ids)) == 100
    assert ids == sorted(ids)


@pytest.mark.parametrize("body", [
    None, True, 0, -17, 2**62, 3.25, "", "Schadensmeldung ü ✓", [1, "two", None],
    {"claim": {"lines": [1, 2], "note": None}}, b"", b"\x00\xff raw \x80 bytes",
])
def test_rule_02_json_and_bytes_bodies_round_trip_exactly(broker: hailq.Broker, body: object,
                                                          ) -> None:
    q = broker.queue("claims")
    q.send(body)

    (msg,) = q.receive()

    assert msg.body == body
    assert type(msg.body) is type(body)


def test_rule_02_a_body_of_exactly_max_message_size_is_accepted(broker: hailq.Broker) -> None:
    q = broker.queue("claims", max_message_size=64)

    q.send(b"x" * 64)
    q.send("y" * 62)  # 62 characters plus two quotes: 64 bytes of JSON

    assert [len(m.body) for m in q.receive(max_messages=2)] == [64, 62]


def test_rule_02_send_many_applies_each_envelope(broker: hailq.Broker) -> None:
    q = broker.queue("claims")

    ids = q.send_many([
        "plain",
        Envelope("urgent", priority=9, headers={"kind": "fraud"}),
        Envelope("keyed", ordering_key="policy-1"),
        Envelope("later", delay=60),
    ])

    received = q.receive(max_messages=10)
    assert [m.body for m in received] == ["urgent", "plain", "keyed"]
    assert received[0].headers == {"kind": "fraud"}
    assert received[2].ordering_key == "policy-1"
    assert {m.id for m in received} == set(ids[:3])
    assert q.stats().delayed == 1


def test_rule_02_send_many_is_all_or_nothing(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    q.send("before")

    with pytest.raises(InvalidArgument):
        q.send_many(["ok-1", "ok-2", Envelope("bad", priority=10), "ok-3"])
    with pytest.raises(InvalidArgument):
        q.send_many(["ok-1", {1: "int key"}])

    assert q.stats().sent == 1
    assert [m.body for m in receive_all(q)] == ["before"]


# -- rule 3: transactional enqueue ---------------------------------------------------------


def test_rule_03_rolled_back_transaction_leaves_no_message(broker: hailq.Broker,
                                                           raw: RawDatabase) -> None:
    q = broker.queue("claims")
    orders = raw.create_table("orders", "id INTEGER PRIMARY KEY")
    conn = raw.connect()
    try:
        conn.execute(raw.sql(f"INSERT INTO {orders} (id) VALUES (?)"), (1,))
        q.send({"order": 1}, connection=conn)
        assert q.peek() == []  # not visible before the caller commits
        conn.rollback()
    finally:
        conn.close()

    assert raw.count(orders) == 0
    assert q.receive() == []
    assert q.stats().sent == 0


def test_rule_03_committed_transaction_makes_the_message_receivable(
        broker: hailq.Broker, raw: RawDatabase) -> None:
    q = broker.queue("claims")
    orders = raw.create_table("orders", "id INTEGER PRIMARY KEY")
    conn = raw.connect()
    try:
        conn.execute(raw.sql(f"INSERT INTO {orders} (id) VALUES (?)"), (1,))
        sent = q.send({"order": 1}, connection=conn)
        q.send_many([{"order": 1, "line": 1}, {"order": 1, "line": 2}], connection=conn)
        conn.commit()
    finally:
        conn.close()

    assert raw.count(orders) == 1
    received = q.receive(max_messages=10)
    assert [m.body for m in received] == [
        {"order": 1}, {"order": 1, "line": 1}, {"order": 1, "line": 2}]
    assert received[0].id == sent


# -- rule 4: dedup ------------------------------------------------------------------------------


def test_rule_04_duplicate_dedup_id_returns_first_id_and_enqueues_nothing(
        broker: hailq.Broker) -> None:
    q = broker.queue("claims")

    first = q.send({"claim": 1}, dedup_id="claim-1")
    again = q.send({"claim": 1, "retry": True}, dedup_id="claim-1")
    batch = q.send_many([Envelope("x", dedup_id="claim-1"), Envelope("y", dedup_id="claim-2"),
                         Envelope("z", dedup_id="claim-2")])

    assert again == first
    assert batch[0] == first
    assert batch[1] == batch[2] != first
    assert q.stats().sent == 2
    assert [m.body for m in receive_all(q)] == [{"claim": 1}, "y"]


def test_rule_04_dedup_holds_after_ack_and_is_per_queue(broker: hailq.Broker) -> None:
    claims = broker.queue("claims")
    audit = broker.queue("audit")
    first = claims.send("one", dedup_id="d-1")
    claims.receive()[0].ack()

    assert claims.send("one again", dedup_id="d-1") == first
    assert claims.receive() == []
    other = audit.send("one", dedup_id="d-1")
    assert other != first
    assert [m.id for m in audit.receive()] == [other]


def test_rule_04_dedup_ends_with_the_window(broker: hailq.Broker) -> None:
    q = broker.queue("claims", dedup_window=0.3)
    first = q.send("one", dedup_id="d-1")

    advance(broker, 0.45)
    second = q.send("two", dedup_id="d-1")

    assert second != first
    assert [m.body for m in receive_all(q)] == ["one", "two"]


# -- rule 5: delay and not_before ----------------------------------------------------------


def test_rule_05_delayed_message_is_not_receivable_before_its_time(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    sent_at = time.time()
    q.send("later", delay=0.5)
    q.send("now")

    assert [m.body for m in q.receive(max_messages=10)] == ["now"]
    assert q.stats().delayed == 1

    (msg,) = q.receive(wait=5)
    assert msg.body == "later"
    assert time.time() - sent_at >= 0.45


def test_rule_05_not_before_is_honoured(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    due = datetime.now(UTC) + timedelta(seconds=0.5)
    q.send_many([Envelope("at-due", not_before=due)])
    q.send("epoch", not_before=time.time() + 0.5)

    assert q.receive(max_messages=10) == []
    assert q.stats().delayed == 2

    advance(broker, 0.6)
    assert sorted(m.body for m in q.receive(max_messages=10)) == ["at-due", "epoch"]


def test_rule_05_not_before_in_the_past_is_receivable_now(broker: hailq.Broker) -> None:
    q = broker.queue("claims")

    q.send("overdue", not_before=datetime.now(UTC) - timedelta(hours=1))

    assert [m.body for m in q.receive()] == ["overdue"]
