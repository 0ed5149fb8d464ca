"""Rule 32: an operator pauses and resumes queues, deletes queues, topics,
subscriptions and single messages, looks one message up, and changes a queue's
settings; a pause or a change reaches running workers within a second and survives
their restarts and the next deploy's declarations. Every backend, public API only."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import hailq
from hailq import Message
from waiting import wait_for

SOON = 1.0  # "within a second"


@contextmanager
def running_worker(broker: hailq.Broker, queue: str, seen: list[str],
                   **declared: object) -> Iterator[hailq.Worker]:
    def handle(message: Message) -> None:
        seen.append(message.id)

    app = hailq.App()
    app.add(queue, handle, **declared)
    worker = hailq.Worker(broker, app, poll=0.2, grace=2)
    thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False})
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(10)
        assert not thread.is_alive()


# -- pause and resume -----------------------------------------------------------------------


def test_rule_32_paused_queue_gives_receivers_nothing_and_still_takes_sends(
        broker: hailq.Broker) -> None:
    claims = broker.queue("claims")
    claims.send({"claim": 1})
    claims.pause()
    claims.send({"claim": 2})
    assert claims.receive(max_messages=10) == []
    assert claims.receive(max_messages=10, wait=0.3) == []
    stats = claims.stats()
    assert stats.paused and stats.ready == 2
    claims.resume()
    assert not claims.stats().paused
    assert len(claims.receive(max_messages=10)) == 2


def test_rule_32_a_pause_reaches_a_running_worker_within_a_second(
        broker: hailq.Broker) -> None:
    claims = broker.queue("claims")
    seen: list[str] = []
    with running_worker(broker, "claims", seen):
        first = claims.send({"claim": 1})
        wait_for(lambda: first in seen)
        broker.get_queue("claims").pause()  # an operator, elsewhere
        time.sleep(SOON)  # about time: the pause reaches the worker within SOON
        second = claims.send({"claim": 2})
        time.sleep(0.5)  # about time: nothing is handled while paused
        assert second not in seen
        broker.get_queue("claims").resume()
        wait_for(lambda: second in seen, timeout=SOON + 2.0)


def test_rule_32_a_pause_survives_the_workers_restart_and_its_declaration(
        broker: hailq.Broker) -> None:
    broker.queue("claims", lease=60).pause()
    broker.queue("claims").send({"claim": 1})
    seen: list[str] = []
    with running_worker(broker, "claims", seen, lease=90) as worker:  # declares again
        wait_for(lambda: worker.state == "running", timeout=10, what="the worker to start")
        time.sleep(0.5)  # the scenario: a few of its polls (0.2 s) go by, nothing handled
        assert seen == []
        assert broker.get_queue("claims").stats().paused


def test_rule_32_pausing_a_queue_that_does_not_exist_is_queue_not_found(
        broker: hailq.Broker) -> None:
    ghost = broker.queue("ghost")
    broker.delete_queue("ghost")
    with pytest.raises(hailq.QueueNotFound):
        ghost.pause()
    assert broker.queues() == []


# -- settings -------------------------------------------------------------------------------


def test_rule_32_an_operators_setting_survives_the_next_deploy_and_is_shown(
        broker: hailq.Broker) -> None:
    broker.queue("claims", lease=300, max_attempts=5)
    effective = broker.configure("claims", lease=60, max_in_flight=10).settings
    assert (effective.lease, effective.max_in_flight, effective.max_attempts) == (60, 10, 5)
    deployed = broker.queue("claims", lease=200, max_attempts=7)  # the next deploy
    assert (deployed.settings.lease, deployed.settings.max_attempts) == (60, 7)
    assert deployed.overrides == {"lease": 60.0, "max_in_flight": 10}
    shown = broker.get_queue("claims")
    assert shown.settings == deployed.settings
    assert sorted(shown.overrides) == ["lease", "max_in_flight"]
    reset = shown.configure(reset=True)
    assert (reset.lease, reset.max_in_flight, reset.max_attempts) == (200, None, 7)
    assert broker.get_queue("claims").overrides == {}


def test_rule_32_an_overridden_lease_reaches_a_running_consumer(broker: hailq.Broker) -> None:
    claims = broker.queue("claims", lease=30)
    consumer = broker.get_queue("claims")  # another process's view, settings cached
    claims.send(1)
    consumer.receive()
    broker.configure("claims", lease=0.2)
    time.sleep(SOON)  # about time: the settings cache (monotonic) runs out
    claims.send(2)
    [message] = consumer.receive()
    assert message.lease_until - broker.now() < 1.0


def test_rule_32_a_bad_setting_raises_and_changes_nothing(broker: hailq.Broker) -> None:
    claims = broker.queue("claims", lease=30)
    for bad in ({"lease": -1}, {"max_attempts": 0}, {"colour": "red"}, {"on_dead": "x"}):
        with pytest.raises(hailq.InvalidArgument):
            claims.configure(**bad)  # type: ignore[arg-type]
    with pytest.raises(hailq.InvalidArgument):
        claims.configure(reset="yes")  # type: ignore[arg-type]
    assert broker.get_queue("claims").overrides == {}
    assert broker.get_queue("claims").settings.lease == 30


# -- deleting queues, topics and subscriptions ----------------------------------------------


def test_rule_32_a_queue_holding_messages_is_deleted_only_when_forced(
        broker: hailq.Broker) -> None:
    claims = broker.queue("claims")
    claims.send(1)
    with pytest.raises(hailq.QueueNotEmpty):
        broker.delete_queue("claims")
    assert claims.stats().ready == 1
    assert broker.delete_queue("claims", force=True) == 1
    for action in (lambda: claims.send(2), lambda: claims.receive(),
                   lambda: claims.receive(wait=0.2), lambda: claims.stats()):
        with pytest.raises(hailq.QueueNotFound):
            action()
    assert [q.name for q in broker.queues()] == []
    with pytest.raises(hailq.QueueNotFound):
        broker.get_queue("claims")


def test_rule_32_an_empty_queue_is_deleted_without_force(broker: hailq.Broker) -> None:
    broker.queue("claims")
    assert broker.delete_queue("claims") == 0
    with pytest.raises(hailq.QueueNotFound):
        broker.delete_queue("claims")
    with pytest.raises(hailq.InvalidArgument):
        broker.delete_queue("bad name")
    with pytest.raises(hailq.InvalidArgument):
        broker.delete_queue("claims", force="yes")  # type: ignore[arg-type]


def test_rule_32_a_deleted_subscription_queue_stops_receiving_copies(
        broker: hailq.Broker) -> None:
    topic = broker.topic("orders.paid")
    topic.subscribe("billing")
    topic.subscribe("shipping")
    broker.delete_queue("shipping")
    assert topic.publish({"order": 1}).keys() == {"billing"}
    assert [s.queue for s in topic.subscriptions()] == ["billing"]


def test_rule_32_a_topic_with_subscriptions_is_deleted_only_when_forced(
        broker: hailq.Broker) -> None:
    topic = broker.topic("orders.paid")
    billing = topic.subscribe("billing")
    topic.publish({"order": 1})
    with pytest.raises(hailq.TopicHasSubscriptions):
        broker.delete_topic("orders.paid")
    assert [t.name for t in broker.topics()] == ["orders.paid"]
    assert broker.delete_topic("orders.paid", force=True) == 1
    assert broker.topics() == []
    assert billing.stats().ready == 1  # the subscription's queue and its messages stay
    with pytest.raises(hailq.TopicNotFound):
        topic.publish({"order": 2})
    with pytest.raises(hailq.TopicNotFound):
        broker.delete_topic("orders.paid")


def test_rule_32_unsubscribe_stops_the_copies_and_keeps_the_queue(broker: hailq.Broker) -> None:
    topic = broker.topic("orders.paid")
    topic.subscribe("billing")
    topic.subscribe("audit")
    topic.unsubscribe("audit")
    assert topic.publish({"order": 1}).keys() == {"billing"}
    assert broker.get_queue("audit").stats().ready == 0
    with pytest.raises(hailq.SubscriptionNotFound):
        topic.unsubscribe("audit")
    with pytest.raises(hailq.NotFound):  # SubscriptionNotFound is one
        topic.unsubscribe("nobody")


# -- one message ----------------------------------------------------------------------------


def test_rule_32_one_message_is_looked_up_with_every_attempts_error(
        broker: hailq.Broker) -> None:
    claims = broker.queue("claims", max_attempts=2)
    sent = claims.send({"claim": 8311}, priority=3, headers={"source": "portal"})
    found = claims.get_message(sent)
    assert found is not None
    assert (found.state, found.attempt, found.body, found.headers, found.priority) == (
        "ready", 0, {"claim": 8311}, {"source": "portal"}, 3)
    [message] = claims.receive()
    assert claims.get_message(sent).state == "leased"  # type: ignore[union-attr]
    message.nack(delay=0, error="decoder crashed")
    [message] = claims.receive()
    message.nack(delay=0, error="decoder crashed again")
    dead = claims.get_message(sent)
    assert dead is not None
    assert (dead.state, dead.attempt) == ("dead", 2)
    assert [e.error for e in dead.errors] == ["decoder crashed", "decoder crashed again"]
    assert dead.last_error == "decoder crashed again"
    message_id = claims.send(2)
    claims.receive()[0].ack()
    assert claims.get_message(message_id) is None
    with pytest.raises(hailq.InvalidArgument):
        claims.get_message("not-an-id")


def test_rule_32_deleting_a_leased_message_makes_its_ack_lease_lost(
        broker: hailq.Broker) -> None:
    claims = broker.queue("claims")
    sent = claims.send(1)
    [message] = claims.receive()
    assert claims.delete_message(sent)
    with pytest.raises(hailq.LeaseLost):
        message.ack()
    assert not claims.delete_message(sent)
    with pytest.raises(hailq.InvalidArgument):
        claims.delete_message("not-an-id")


def test_rule_32_deleting_a_keys_head_lets_the_key_flow_on(broker: hailq.Broker) -> None:
    claims = broker.queue("claims")
    first = claims.send(1, ordering_key="contract-77")
    second = claims.send(2, ordering_key="contract-77")
    assert [m.id for m in claims.receive(max_messages=5)] == [first]
    claims.delete_message(first)
    assert [m.id for m in claims.receive(max_messages=5)] == [second]


# -- the counters stay true -----------------------------------------------------------------


def test_rule_32_deleted_messages_never_count_as_acked(broker: hailq.Broker) -> None:
    claims = broker.queue("claims")
    ids = [claims.send(n) for n in range(4)]
    claims.delete_message(ids[0])  # ready
    [leased] = claims.receive()
    claims.delete_message(leased.id)  # leased
    [done] = claims.receive()
    done.ack()
    stats = claims.stats()
    assert (stats.sent, stats.acked, stats.ready) == (4, 1, 1)
    broker.delete_queue("claims", force=True)
    again = broker.queue("claims")
    again.send(5)
    stats = again.stats()
    assert (stats.sent, stats.acked, stats.ready) == (1, 0, 1)
