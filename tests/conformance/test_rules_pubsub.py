"""SPEC rules 19-20: topics fan out to subscriptions, each an independent queue."""

from __future__ import annotations

import pytest

import hailq
from hailq import MessageTooLarge

from .helpers import RawDatabase, drain, receive_all

# -- rule 19: publish ---------------------------------------------------------------------------


def test_rule_19_publish_copies_into_every_subscription_alike(broker: hailq.Broker) -> None:
    orders = broker.topic("orders")
    billing = orders.subscribe("billing")
    shipping = orders.subscribe("shipping")

    ids = orders.publish({"order": 42}, priority=4, ordering_key="customer-7",
                         headers={"type": "created"})

    assert set(ids) == {"billing", "shipping"}
    copies = [q.receive()[0] for q in (billing, shipping)]
    assert [c.id for c in copies] == [ids["billing"], ids["shipping"]]
    for copy in copies:
        assert copy.body == {"order": 42}
        assert (copy.priority, copy.ordering_key) == (4, "customer-7")
        assert copy.headers == {"type": "created"}
    assert sorted(s.queue for s in orders.subscriptions()) == ["billing", "shipping"]


def test_rule_19_publish_reaches_only_subscriptions_existing_at_that_moment(
        broker: hailq.Broker) -> None:
    orders = broker.topic("orders")
    early = orders.subscribe("early")
    orders.publish("before")

    late = orders.subscribe("late")
    orders.publish("after")

    assert [m.body for m in receive_all(early)] == ["before", "after"]
    assert [m.body for m in receive_all(late)] == ["after"]


def test_rule_19_publish_without_subscriptions_writes_nothing(broker: hailq.Broker) -> None:
    orders = broker.topic("orders")

    assert orders.publish("into the void") == {}
    assert broker.queues() == []
    assert [t.name for t in broker.topics()] == ["orders"]


def test_rule_19_filter_matches_headers(broker: hailq.Broker) -> None:
    orders = broker.topic("orders")
    eu = orders.subscribe("eu-billing", filter={"region": "eu"})
    big = orders.subscribe("big-parcels", filter={"size": ["L", "XL"], "region": "eu"})
    every = orders.subscribe("audit")

    orders.publish("eu small", headers={"region": "eu", "size": "S"})
    orders.publish("eu large", headers={"region": "eu", "size": "XL"})
    orders.publish("us large", headers={"region": "us", "size": "L"})
    orders.publish("no headers")

    assert [m.body for m in receive_all(eu)] == ["eu small", "eu large"]
    assert [m.body for m in receive_all(big)] == ["eu large"]
    assert len(receive_all(every)) == 4


def test_rule_19_publish_is_atomic(broker: hailq.Broker) -> None:
    orders = broker.topic("orders")
    archive = orders.subscribe("archive")
    thumbnails = orders.subscribe("thumbnails", max_message_size=100)

    with pytest.raises(MessageTooLarge):
        orders.publish({"scan": "x" * 200})

    for q in (archive, thumbnails):
        assert q.stats().sent == 0
        assert q.receive() == []
    orders.publish({"scan": "small"})
    assert [len(receive_all(q)) for q in (archive, thumbnails)] == [1, 1]


def test_rule_19_subscription_settings_are_its_queue_settings(broker: hailq.Broker) -> None:
    orders = broker.topic("orders")

    fast = orders.subscribe("fast", lease=5, max_attempts=2)

    assert (fast.settings.lease, fast.settings.max_attempts) == (5.0, 2)
    assert broker.get_queue("fast").settings.lease == 5.0


def test_rule_19_each_copy_is_held_to_its_own_subscriptions_size_limit(
        broker: hailq.Broker) -> None:
    orders = broker.topic("orders")
    big = orders.subscribe("archive", max_message_size=4 * 1024 * 1024)
    body = "x" * (2 * 1024 * 1024)  # over the 1 MiB default, within archive's 4 MiB
    assert list(orders.publish(body)) == ["archive"]
    (m,) = big.receive()
    assert m.body == body
    m.ack()
    small = orders.subscribe("audit")  # the default 1 MiB
    with pytest.raises(hailq.MessageTooLarge, match="subscription audit"):
        orders.publish(body)
    assert (big.stats().ready, small.stats().ready) == (0, 0)  # all or none


def test_rule_19_publish_many_is_one_atomic_batch(broker: hailq.Broker) -> None:
    claims = broker.topic("claims")
    checkers = claims.subscribe("checkers")
    vip_stats = claims.subscribe("vip-stats", filter={"tier": "vip"})
    batch = [{"claim": n} for n in range(50)] + [
        hailq.Envelope({"claim": 99}, priority=9, headers={"tier": "vip"})]
    results = claims.publish_many(batch)

    assert [sorted(r) for r in results] == [["checkers"]] * 50 + [["checkers", "vip-stats"]]
    assert sorted(m.body["claim"] for m in receive_all(checkers)) == [*range(50), 99]
    assert [(m.body, m.priority) for m in receive_all(vip_stats)] == [({"claim": 99}, 9)]

    with pytest.raises(hailq.InvalidArgument):
        claims.publish_many([{"claim": 1}, {"claim": float("nan")}])
    assert checkers.stats().sent == 51  # the bad batch wrote nothing


# -- rule 20: subscribers are independent -------------------------------------------------------


def test_rule_20_a_failing_subscriber_delays_nobody_else(broker: hailq.Broker) -> None:
    orders = broker.topic("orders")
    audit = orders.subscribe("audit", max_attempts=2)
    mailer = orders.subscribe("mailer")
    for n in range(100):
        orders.publish({"order": n})

    slow = audit.receive(max_messages=10, lease=300)  # held, neither acked nor nacked
    mailed: list[int] = []

    def mail(m: hailq.Message) -> None:
        assert m.attempt == 1
        mailed.append(m.body["order"])
        m.ack()

    drain(mailer, mail)
    assert sorted(mailed) == list(range(100))

    for m in slow:
        m.nack(delay=0, error="audit store down")
    drain(audit, lambda m: m.nack(delay=0, error="audit store down"))

    audit_stats, mailer_stats = audit.stats(), mailer.stats()
    assert (audit_stats.dead, audit_stats.acked) == (100, 0)
    assert (mailer_stats.acked, mailer_stats.dead, mailer_stats.redelivered) == (100, 0, 0)
    assert len(audit.dead_letters()) == 100
    assert mailer.dead_letters() == []


# -- rule 3 for topics: publish inside the application's own transaction (the outbox) -------


@pytest.mark.parametrize("commit", [True, False], ids=["committed", "rolled-back"])
def test_rule_03_publish_joins_the_callers_transaction(broker: hailq.Broker,
                                                       raw: RawDatabase, commit: bool) -> None:
    topic = broker.topic("claim-events")
    audit = topic.subscribe("audit")
    billing = topic.subscribe("billing")
    orders = raw.create_table("orders", "id INTEGER PRIMARY KEY")
    conn = raw.connect()
    try:
        conn.execute(raw.sql(f"INSERT INTO {orders} (id) VALUES (?)"), (1,))
        ids = topic.publish({"order": 1}, connection=conn)
        more = topic.publish_many([{"order": 1, "line": 1}], connection=conn)
        assert audit.peek() == []  # not visible before the caller commits
        if commit:
            conn.commit()
        else:
            conn.rollback()
    finally:
        conn.close()

    assert raw.count(orders) == (1 if commit else 0)
    for queue in (audit, billing):
        got = [m.body for m in queue.receive(max_messages=10)]
        assert got == ([{"order": 1}, {"order": 1, "line": 1}] if commit else [])
        assert queue.stats().sent == (2 if commit else 0)
    assert set(ids) == set(more[0]) == {"audit", "billing"}
