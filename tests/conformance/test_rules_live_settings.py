"""Rule 39: a queue's settings are read where they are applied, never from a copy a
long-lived producer or consumer made. An operator (another process: its own broker)
changes a setting; the ``Queue`` a producer or consumer took before it follows the
change on its next send, claim or nack. Every backend, public API only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import hailq
from hailq import Envelope


@pytest.fixture
def operator(url: str) -> Iterator[hailq.Broker]:
    """An operator's process: a broker of its own on the same database."""
    other = hailq.connect(url)
    yield other
    other.close()


def test_rule_39_a_kept_queue_sends_with_the_aging_an_operator_set_since(
        broker: hailq.Broker, operator: hailq.Broker) -> None:
    kept = broker.queue("claims")  # strict priority, as the producer read it
    operator.configure("claims", aging=10)
    operator.get_queue("claims").send("aged high", priority=9)
    kept.send("stale low", priority=0)  # with the aging it reads now, not a strict key

    assert [m.body for m in kept.receive(max_messages=2)] == ["aged high", "stale low"]


def test_rule_39_a_kept_queue_sends_strict_keys_once_aging_is_turned_off(
        broker: hailq.Broker, operator: hailq.Broker) -> None:
    kept = broker.queue("claims", aging=10)
    operator.configure("claims", aging=None)
    operator.get_queue("claims").send("fresh low", priority=0)
    kept.send_many([Envelope("stale high", priority=9)])  # not starved behind strict keys

    assert [m.body for m in kept.receive(max_messages=2)] == ["stale high", "fresh low"]


def test_rule_39_a_kept_queue_sends_with_the_targets_of_a_deadline_order_set_since(
        broker: hailq.Broker, operator: hailq.Broker) -> None:
    kept = broker.queue("claims", aging=5)
    operator.configure("claims", order="deadline", slo={9: 3600, 0: 1}, aging=None)
    kept.send("tight low", priority=0)   # deadline: now + 1 s
    kept.send("loose high", priority=9)  # deadline: now + an hour

    assert [m.body for m in kept.receive(max_messages=2)] == ["tight low", "loose high"]


def test_rule_39_a_kept_queue_nacks_with_the_retry_policy_an_operator_set_since(
        broker: hailq.Broker, operator: hailq.Broker) -> None:
    kept = broker.queue("claims", retry={"base": 0.0, "max": 0.0, "jitter": 0.0})
    operator.configure("claims", retry={"base": 600, "max": 600, "jitter": 0})
    kept.send("flaky")
    [message] = kept.receive()
    message.nack(error="downstream down")  # the operator's backoff: ten minutes

    stats = kept.stats()
    assert (stats.ready, stats.scheduled) == (0, 1)
    details = kept.get_message(message.id)
    assert details is not None and details.available_at >= message.enqueued_at + 590


def test_rule_39_a_kept_queue_dedups_over_the_window_an_operator_set_since(
        broker: hailq.Broker, operator: hailq.Broker) -> None:
    kept = broker.queue("claims", dedup_window=0)
    operator.configure("claims", dedup_window=3600)
    first = kept.send("once", dedup_id="order-1")

    assert kept.send("once", dedup_id="order-1") == first
    assert kept.stats().ready == 1


def test_rule_39_a_kept_queue_refuses_a_body_over_the_size_an_operator_set_since(
        broker: hailq.Broker, operator: hailq.Broker) -> None:
    kept = broker.queue("claims")
    operator.configure("claims", max_message_size=100)

    with pytest.raises(hailq.InvalidArgument, match="100"):
        kept.send("x" * 1000)
    assert kept.stats().ready == 0


def test_rule_39_a_kept_queue_sends_a_body_an_operator_allowed_since(
        broker: hailq.Broker, operator: hailq.Broker) -> None:
    kept = broker.queue("claims", max_message_size=100)
    operator.configure("claims", max_message_size=10_000)

    kept.send("x" * 1000)
    assert kept.stats().ready == 1


def test_rule_39_publish_follows_the_overrides_of_each_subscriptions_queue(
        broker: hailq.Broker, operator: hailq.Broker) -> None:
    topic = broker.topic("events")
    topic.subscribe("audit", max_message_size=100)
    topic.subscribe("billing")
    topic.publish("small")  # a topic that has published keeps nothing of its queues
    operator.configure("audit", max_message_size=10_000)
    operator.configure("billing", max_message_size=100)

    with pytest.raises(hailq.MessageTooLarge, match="subscription billing"):
        topic.publish("x" * 1000)
    with pytest.raises(hailq.MessageTooLarge, match="subscription billing"):
        operator.topic("events").publish("x" * 1000)  # a fresh broker: overrides too
    assert (broker.get_queue("audit").stats().ready,
            broker.get_queue("billing").stats().ready) == (1, 1)  # nothing published
    operator.configure("billing", reset=True)
    assert set(topic.publish("x" * 1000)) == {"audit", "billing"}


def test_rule_39_publish_sorts_each_copy_by_its_queues_aging_as_stored_now(
        broker: hailq.Broker, operator: hailq.Broker) -> None:
    topic = broker.topic("events")
    audit = topic.subscribe("audit")
    topic.publish("warm")
    operator.configure("audit", aging=10)
    audit.send("aged high", priority=9)
    topic.publish("published low", priority=0)

    assert [m.body for m in audit.receive(max_messages=3)] == [
        "aged high", "warm", "published low"]
