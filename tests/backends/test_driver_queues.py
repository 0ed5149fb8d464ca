"""The seam's queues, live settings, topics, workers, schema and clock on every backend
(SPEC rules 1, 11, 13, 19, 20, 30, 32)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any, cast

import pytest

import hailq
from hailq.backends import core
from hailq.backends.base import (
    Backend,
    DeadListParams,
    NackParams,
    NewMessage,
    PeekParams,
    PublishParams,
    QueueRef,
    SendParams,
    TopicRef,
    WorkerPruneParams,
)
from hailq.errors import QueueNotFound
from hailq.models import Subscription, WorkerInfo
from hailq.settings import QueueSettings

from .conftest import (
    LEASE,
    Store,
    caller_transaction,
    claim,
    message,
    outlive,
    pass_time,
    receipt,
    save,
    send,
)

# -- schema and clock ---------------------------------------------------------------------------


def test_schema_is_at_the_latest_version_after_migrate(store: Store) -> None:
    backend = store.backend
    latest = backend.schema_latest()
    assert latest >= 1
    assert backend.schema_version() == latest
    assert backend.schema_migrate() == latest  # again: nothing to do
    assert store.open().schema_version() == latest


def test_clock_now_is_the_backends_clock_near_the_hosts(store: Store) -> None:
    backend = store.backend
    first = backend.clock_now()
    assert isinstance(first, float)
    assert abs(first - time.time()) < 2
    time.sleep(0.05)  # about time: the clock itself is under test
    assert backend.clock_now() >= first + 0.04
    if store.kind == "postgres":  # the database's clock (rule 11)
        conn = store.connect()
        try:
            row = conn.execute("SELECT extract(epoch from clock_timestamp())::float8").fetchone()
        finally:
            conn.close()
        assert abs(backend.clock_now() - float(row[0])) < 0.5


# -- queues -------------------------------------------------------------------------------------


def test_queue_save_get_list_round_trip(backend: Backend) -> None:
    assert backend.queue_get(QueueRef("orders")) is None
    assert backend.queue_list() == []
    orders = save(backend, "orders", lease=12, max_attempts=3)
    audit = save(backend, "audit", aging=5, on_dead="park", max_in_flight=7)
    stored = backend.queue_get(QueueRef("orders"))
    assert stored is not None
    assert QueueSettings.from_json(stored) == orders
    assert backend.queue_list() == [("audit", audit.to_json()), ("orders", orders.to_json())]
    changed = save(backend, "orders", lease=20, max_attempts=3)
    assert json.loads(backend.queue_get(QueueRef("orders")) or "null")["lease"] == 20
    assert [n for n, _ in backend.queue_list()] == ["audit", "orders"]
    assert QueueSettings.from_json(dict(backend.queue_list())["orders"]) == changed


def test_claim_without_a_lease_uses_the_queues_stored_lease(backend: Backend) -> None:
    save(backend, "q", lease=45)
    send(backend, "q", 1, 2)
    [r] = claim(backend, "q")
    assert r.lease_until - backend.clock_now() == pytest.approx(45, abs=2)
    [r] = claim(backend, "q", lease=5)
    assert r.lease_until - backend.clock_now() == pytest.approx(5, abs=2)


def test_a_changed_lease_reaches_a_running_consumer(store: Store) -> None:
    consumer, operator = store.backend, store.open()
    save(operator, "q", lease=30)
    send(operator, "q", 1, 2)
    [first] = claim(consumer, "q")  # the consumer now knows the queue's settings
    assert first.lease_until - consumer.clock_now() == pytest.approx(30, abs=2)
    save(operator, "q", lease=100)
    time.sleep(core.SETTINGS_FOR + 0.1)  # about time: the settings cache (monotonic) runs out
    [second] = claim(consumer, "q")
    assert second.lease_until - consumer.clock_now() == pytest.approx(100, abs=2)


def test_a_lowered_max_attempts_applies_to_the_next_nack(store: Store) -> None:
    consumer, operator = store.backend, store.open()
    save(operator, "q", max_attempts=5)
    [m] = send(operator, "q", "x")
    [r] = claim(consumer, "q")
    save(operator, "q", max_attempts=1)
    assert consumer.message_nack(NackParams(receipt("q", r), "failed", delay=0.0))
    [dead] = consumer.dead_list(DeadListParams("q"))
    assert (dead.id, dead.last_error) == (m, "failed")


def test_changed_max_attempts_apply_to_upkeep(store: Store) -> None:
    consumer, operator = store.backend, store.open()
    save(operator, "lowered", max_attempts=5)
    save(operator, "raised", max_attempts=1)
    [lowered] = send(operator, "lowered", "x")
    [raised] = send(operator, "raised", "y")
    claim(consumer, "lowered", lease=LEASE)
    claim(consumer, "raised", lease=LEASE)
    save(operator, "lowered", max_attempts=1)
    save(operator, "raised", max_attempts=3)
    outlive()
    consumer.queue_maintain(QueueRef("lowered"))
    consumer.queue_maintain(QueueRef("raised"))
    [dead] = consumer.dead_list(DeadListParams("lowered"))
    assert (dead.id, dead.last_error) == (lowered, "lease expired")
    assert consumer.dead_list(DeadListParams("raised")) == []
    assert [x.id for x in claim(consumer, "raised")] == [raised]


def test_a_queue_never_saved_is_not_found_and_nothing_is_made_up(store: Store) -> None:
    """The core never serves a queue without a row (never declared, or deleted) with
    made-up defaults: send, claim and stats say QueueNotFound and write nothing."""
    backend = store.backend
    with pytest.raises(QueueNotFound):
        send(backend, "undeclared", 1, 2)
    with pytest.raises(QueueNotFound):
        claim(backend, "undeclared")
    with pytest.raises(QueueNotFound):
        backend.queue_stats(QueueRef("undeclared"))
    assert backend.message_peek(PeekParams("undeclared")) == []


def test_a_batch_naming_a_missing_queue_writes_nothing_in_the_others(store: Store) -> None:
    """A batch is all or none (rule 2) across queues too: one message for a queue without a
    row fails the whole batch, whichever form the dialect inserts a batch with."""
    backend = store.backend
    save(backend, "present")
    batch = [message("present", 1), message("undeclared", 2), message("present", 3)]
    with pytest.raises(QueueNotFound):
        backend.message_send(SendParams(batch))
    assert backend.message_peek(PeekParams("present")) == []
    assert send(backend, "present", 4, 5) and len(claim(backend, "present", 5)) == 2


# -- topics -------------------------------------------------------------------------------------


def test_topic_save_is_idempotent_and_listed_in_order(backend: Backend) -> None:
    assert backend.topic_list() == []
    for name in ("orders", "audit", "orders"):
        backend.topic_save(TopicRef(name))
    assert backend.topic_list() == ["audit", "orders"]


def test_subscription_save_and_list(backend: Backend) -> None:
    backend.topic_save(TopicRef("orders"))
    backend.topic_save(TopicRef("other"))
    backend.subscription_save(Subscription("orders", "shipping", None))
    backend.subscription_save(
        Subscription("orders", "billing", {"region": ["eu", "us"]}))
    backend.subscription_save(Subscription("other", "elsewhere", None))
    assert backend.subscription_list(TopicRef("orders")) == [
        Subscription("orders", "billing", {"region": ["eu", "us"]}),
        Subscription("orders", "shipping", None)]
    backend.subscription_save(
        Subscription("orders", "shipping", {"kind": "parcel"}))
    assert backend.subscription_list(TopicRef("orders"))[1] == Subscription(
        "orders", "shipping", {"kind": "parcel"})
    assert backend.subscription_list(TopicRef("none")) == []


def _subscribed(backend: Backend, *queues: str) -> None:
    backend.topic_save(TopicRef("orders"))
    for queue in queues:
        save(backend, queue)
        backend.subscription_save(Subscription("orders", queue, None))


def test_topic_publish_hands_build_the_subscriptions_and_inserts_the_copies(
        backend: Backend) -> None:
    _subscribed(backend, "billing", "shipping")
    seen: list[list[Subscription]] = []
    made: list[NewMessage] = []

    def build(subscriptions: list[Subscription]) -> list[NewMessage]:
        seen.append(subscriptions)
        made.extend(message(s.queue, {"order": 7}, ordering_key="o-7", priority=2)
                    for s in subscriptions)
        return made

    ids = backend.topic_publish(PublishParams("orders", build))
    assert seen == [[Subscription("orders", "billing", None),
                     Subscription("orders", "shipping", None)]]
    assert ids == [m.id for m in made]
    for queue, m in zip(("billing", "shipping"), made, strict=True):
        [p] = backend.message_peek(PeekParams(queue))
        assert (p.id, p.body, p.ordering_key, p.priority) == (m.id, {"order": 7}, "o-7", 2)
        assert backend.queue_stats(QueueRef(queue)).sent == 1


def test_topic_publish_without_subscriptions_inserts_nothing(backend: Backend) -> None:
    backend.topic_save(TopicRef("orders"))
    assert backend.topic_publish(PublishParams("orders", lambda subs: [])) == []


def test_topic_publish_inserts_every_copy_or_none(backend: Backend) -> None:
    _subscribed(backend, "billing", "shipping")

    def build(subscriptions: list[Subscription]) -> list[NewMessage]:
        good = message(subscriptions[0].queue, "good")
        broken = message(subscriptions[1].queue, "broken")._replace(
            body_kind=cast(int, None))  # NOT NULL fails
        return [good, broken]

    with pytest.raises(hailq.StorageError):
        backend.topic_publish(PublishParams("orders", build))
    for queue in ("billing", "shipping"):
        assert backend.message_peek(PeekParams(queue)) == []


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
@pytest.mark.parametrize("style", ["explicit", "implicit"])
def test_topic_publish_with_a_connection_joins_its_transaction(
        store: Store, style: str, commit: bool, request: pytest.FixtureRequest) -> None:
    backend = store.backend
    _subscribed(backend, "billing", "shipping")
    with caller_transaction(store, style, commit) as conn:
        ids = backend.topic_publish(PublishParams(
            "orders", lambda subs: [message(s.queue, "event") for s in subs], conn))
        assert len(ids) == 2
    for queue in ("billing", "shipping"):
        assert len(backend.message_peek(PeekParams(queue))) == (1 if commit else 0)


# -- workers ------------------------------------------------------------------------------------


def _worker(name: str, started_at: float, **changes: Any) -> WorkerInfo:
    info = WorkerInfo(id=name, host="host-1", pid=4242, queues=["a", "b"], concurrency=4,
                      in_flight=0, started_at=started_at, last_seen=0.0, state="running")
    return replace(info, **changes)


def test_worker_save_list_and_prune(backend: Backend) -> None:
    start = backend.clock_now()
    backend.worker_save(_worker("w1", start))
    [w1] = backend.worker_list()
    assert (w1.id, w1.host, w1.pid, w1.queues, w1.concurrency, w1.state) == (
        "w1", "host-1", 4242, ["a", "b"], 4, "running")
    assert w1.started_at == pytest.approx(start)
    assert w1.last_seen == pytest.approx(backend.clock_now(), abs=2)  # the backend's clock
    backend.worker_save(_worker("w1", start, in_flight=3, state="draining"))
    [again] = backend.worker_list()
    assert (again.in_flight, again.state) == (3, "draining")
    assert again.last_seen >= w1.last_seen
    pass_time(0.05)
    backend.worker_save(_worker("w2", start + 1))
    [_, w2] = backend.worker_list()
    assert w2.last_seen > again.last_seen
    assert backend.worker_prune(WorkerPruneParams(w2.last_seen)) == 1
    assert [w.id for w in backend.worker_list()] == ["w2"]
    assert backend.worker_prune(WorkerPruneParams(w2.last_seen)) == 0
