"""The operator's seam methods (rule 32), called directly on every backend: pause,
overrides kept apart from declarations, deleting queues, topics, subscriptions and
single messages, and looking one message up."""

from __future__ import annotations

import json
import threading
import time

import pytest

from hailq.backends import core, sql
from hailq.backends.base import (
    AckParams,
    ClaimParams,
    DeleteParams,
    MessageRef,
    NackParams,
    QueueConfigureParams,
    QueueDescribeParams,
    QueuePauseParams,
    QueueRef,
    SubscriptionDeleteParams,
    TopicRef,
    WaitParams,
)
from hailq.errors import (
    QueueNotEmpty,
    QueueNotFound,
    TopicHasSubscriptions,
    TopicNotFound,
)
from hailq.models import Subscription
from hailq.settings import QueueSettings

from .conftest import LEASE, Store, claim, outlive, receipt, save, send, unchanged


def _configure(store: Store, queue: str, reset: bool = False, **changes: object) -> None:
    store.backend.queue_configure(QueueConfigureParams(queue, json.dumps(changes), reset))


def _live(store: Store, queue: str) -> core.Live:
    backend = getattr(store.backend, "driven", store.backend)  # through hailq.aio too
    assert isinstance(backend, sql.SqlBackend)
    return backend.dialect.read(lambda tx: backend.messages.live(tx, queue, fresh=True))


# -- pause ----------------------------------------------------------------------------------


def test_a_paused_queue_leases_nothing_and_still_takes_sends(store: Store) -> None:
    backend = store.backend
    save(backend, "q")
    send(backend, "q", 1)
    backend.queue_pause(QueuePauseParams("q", True))
    send(backend, "q", 2)
    assert claim(backend, "q", 10) == []
    stats = backend.queue_stats(QueueRef("q"))
    assert (stats.paused, stats.ready) == (True, 2)
    backend.queue_pause(QueuePauseParams("q", False))
    assert len(claim(backend, "q", 10)) == 2
    assert backend.queue_stats(QueueRef("q")).paused is False


def test_a_pause_reaches_a_consumer_of_another_process_within_its_settings_cache(
        store: Store) -> None:
    save(store.backend, "q")
    send(store.backend, "q", 1, 2)
    other = store.open()
    assert len(claim(other, "q")) == 1  # its settings are cached now
    store.backend.queue_pause(QueuePauseParams("q", True))
    time.sleep(core.SETTINGS_FOR + 0.1)  # about time: the settings cache (monotonic) runs out
    assert claim(other, "q") == []


def test_acks_go_through_while_the_queue_is_paused(store: Store) -> None:
    backend = store.backend
    save(backend, "q")
    send(backend, "q", 1, 2)
    [row] = claim(backend, "q")
    backend.queue_pause(QueuePauseParams("q", True))
    result = backend.message_claim(ClaimParams("q", 5, None, [receipt("q", row)]))
    assert (result.acked, result.rows) == ([False], [])
    assert backend.queue_stats(QueueRef("q")).acked == 1


def test_a_receiver_waiting_on_a_paused_queue_with_ready_messages_sleeps(store: Store) -> None:
    """A long poll on a paused queue whose messages are ready claims nothing; its waits
    must sleep, not return at once (the receiver would spin: claim, wait, claim...)."""
    backend = store.backend
    save(backend, "q")
    send(backend, "q", 1)
    backend.queue_pause(QueuePauseParams("q", True))
    rounds = 0
    deadline = time.monotonic() + 1.5
    while (remaining := deadline - time.monotonic()) > 0:  # Queue.receive(wait=1.5)
        assert claim(backend, "q") == []
        rounds += 1
        backend.message_wait(WaitParams(["q"], remaining))
    assert rounds <= 6, f"{rounds} claims in 1.5 s: the receiver spins"


def test_a_resume_wakes_a_waiting_receiver(store: Store) -> None:
    backend = store.backend
    save(backend, "q")
    send(backend, "q", 1)
    backend.queue_pause(QueuePauseParams("q", True))
    claim(backend, "q")
    other = store.open()
    threading.Timer(0.3, lambda: other.queue_pause(QueuePauseParams("q", False))).start()
    started = time.monotonic()
    backend.message_wait(WaitParams(["q"], 5.0))
    assert time.monotonic() - started < 3.0
    time.sleep(core.SETTINGS_FOR)  # about time: the settings cache (monotonic) runs out
    assert len(claim(backend, "q")) == 1


def test_declaring_again_keeps_the_pause(store: Store) -> None:
    save(store.backend, "q", lease=10)
    store.backend.queue_pause(QueuePauseParams("q", True))
    save(store.backend, "q", lease=20)  # a worker starts and declares its queue
    [record] = store.backend.queue_describe(QueueDescribeParams(["q"]))
    assert record.paused
    assert store.backend.queue_stats(QueueRef("q")).paused


def test_pausing_a_queue_that_does_not_exist_is_queue_not_found(store: Store) -> None:
    with pytest.raises(QueueNotFound):
        store.backend.queue_pause(QueuePauseParams("nobody", True))
    assert store.backend.queue_describe(QueueDescribeParams(None)) == []


# -- overrides ------------------------------------------------------------------------------


def test_overrides_are_kept_apart_and_declaring_never_undoes_them(store: Store) -> None:
    backend = store.backend
    save(backend, "q", lease=10, max_attempts=3)
    _configure(store, "q", lease=60, max_in_flight=2)
    assert _live(store, "q")[:3] == (60.0, 2, 3)
    save(backend, "q", lease=15, max_attempts=4)  # the next deploy
    assert _live(store, "q")[:3] == (60.0, 2, 4)
    [record] = backend.queue_describe(QueueDescribeParams(["q"]))
    assert QueueSettings.from_json(record.declared).lease == 15
    assert json.loads(record.overrides or "{}") == {"lease": 60.0, "max_in_flight": 2}
    _configure(store, "q", reset=True)
    assert _live(store, "q")[:3] == (15.0, None, 4)
    [record] = backend.queue_describe(QueueDescribeParams(["q"]))
    assert record.overrides is None


def test_an_override_to_none_takes_a_declared_cap_away(store: Store) -> None:
    save(store.backend, "q", max_in_flight=1)
    _configure(store, "q", max_in_flight=None)
    assert _live(store, "q").max_in_flight is None
    send(store.backend, "q", 1, 2)
    assert len(claim(store.backend, "q", 2)) == 2


def test_overridden_max_attempts_is_what_a_nack_obeys(store: Store) -> None:
    backend = store.backend
    save(backend, "q", max_attempts=5)
    _configure(store, "q", max_attempts=1)
    send(backend, "q", 1)
    [row] = claim(backend, "q")
    assert backend.message_nack(NackParams(receipt("q", row), "boom", delay=0.0))
    assert backend.queue_stats(QueueRef("q")).dead == 1


def test_a_bad_override_changes_nothing(store: Store) -> None:
    from hailq.errors import InvalidArgument

    save(store.backend, "q", lease=10)
    with pytest.raises(InvalidArgument):
        _configure(store, "q", lease=-1)
    with pytest.raises(QueueNotFound):
        _configure(store, "nobody", lease=5)
    [record] = store.backend.queue_describe(QueueDescribeParams(["q"]))
    assert record.overrides is None
    assert _live(store, "q").lease == 10


# -- deleting queues ------------------------------------------------------------------------


def test_a_queue_with_messages_is_kept_unless_forced(store: Store) -> None:
    backend = store.backend
    save(backend, "q")
    send(backend, "q", 1, 2)
    with unchanged(store), pytest.raises(QueueNotEmpty):
        backend.queue_delete(DeleteParams("q"))
    assert backend.queue_delete(DeleteParams("q", force=True)) == 2
    assert backend.queue_get(QueueRef("q")) is None
    with pytest.raises(QueueNotFound):
        send(backend, "q", 3)
    with pytest.raises(QueueNotFound):
        claim(backend, "q")
    with pytest.raises(QueueNotFound):
        backend.queue_stats(QueueRef("q"))
    with pytest.raises(QueueNotFound):
        backend.queue_delete(DeleteParams("q"))


def test_a_dead_message_alone_keeps_a_queue_from_deletion(store: Store) -> None:
    backend = store.backend
    save(backend, "q")
    send(backend, "q", 1)
    [row] = claim(backend, "q")
    backend.message_nack(NackParams(receipt("q", row), "boom", outcome="dead"))
    with pytest.raises(QueueNotEmpty):
        backend.queue_delete(DeleteParams("q"))


def test_a_deleted_queue_declared_again_starts_empty_with_fresh_counters(store: Store) -> None:
    backend = store.backend
    save(backend, "q")
    send(backend, "q", 1, 2, 3)
    backend.queue_pause(QueuePauseParams("q", True))
    _configure(store, "q", lease=99)
    backend.queue_delete(DeleteParams("q", force=True))
    save(backend, "q")
    send(backend, "q", 4)
    stats = backend.queue_stats(QueueRef("q"))
    assert (stats.sent, stats.acked, stats.ready, stats.paused) == (1, 0, 1, False)
    assert _live(store, "q").lease == 30


def test_a_consumer_in_another_process_gets_queue_not_found_after_its_cache(
        store: Store) -> None:
    save(store.backend, "q")
    send(store.backend, "q", 1)
    other = store.open()
    assert len(claim(other, "q")) == 1
    store.backend.queue_delete(DeleteParams("q", force=True))
    assert claim(other, "q") == []  # within its settings cache: nothing to lease
    time.sleep(core.SETTINGS_FOR + 0.1)  # about time: the settings cache (monotonic) runs out
    with pytest.raises(QueueNotFound):
        claim(other, "q")


def test_deleting_a_subscription_queue_stops_its_copies(store: Store) -> None:
    backend = store.backend
    for name in ("a", "b"):
        save(backend, name)
    backend.topic_save(TopicRef("t"))
    backend.subscription_save(Subscription("t", "a", None))
    backend.subscription_save(Subscription("t", "b", None))
    backend.queue_delete(DeleteParams("b"))
    assert [s.queue for s in backend.subscription_list(TopicRef("t"))] == ["a"]


# -- topics and subscriptions ---------------------------------------------------------------


def test_a_topic_with_subscriptions_is_kept_unless_forced(store: Store) -> None:
    backend = store.backend
    save(backend, "a")
    backend.topic_save(TopicRef("t"))
    backend.subscription_save(Subscription("t", "a", None))
    with pytest.raises(TopicHasSubscriptions):
        backend.topic_delete(DeleteParams("t"))
    assert backend.topic_list() == ["t"]
    assert backend.topic_delete(DeleteParams("t", force=True)) == 1
    assert backend.topic_list() == []
    assert backend.subscription_list(TopicRef("t")) == []
    assert backend.queue_get(QueueRef("a")) is not None  # the subscription's queue stays
    with pytest.raises(TopicNotFound):
        backend.topic_delete(DeleteParams("t"))


def test_unsubscribe_removes_only_that_subscription(store: Store) -> None:
    backend = store.backend
    save(backend, "a")
    save(backend, "b")
    backend.topic_save(TopicRef("t"))
    backend.subscription_save(Subscription("t", "a", None))
    backend.subscription_save(Subscription("t", "b", None))
    assert backend.subscription_delete(SubscriptionDeleteParams("t", "a"))
    assert not backend.subscription_delete(SubscriptionDeleteParams("t", "a"))
    assert [s.queue for s in backend.subscription_list(TopicRef("t"))] == ["b"]
    assert backend.queue_get(QueueRef("a")) is not None


# -- one message ----------------------------------------------------------------------------


def test_message_get_shows_state_attempts_and_every_error(store: Store) -> None:
    backend = store.backend
    save(backend, "q", max_attempts=2)
    [sent] = send(backend, "q", {"claim": 1}, headers=json.dumps({"h": "v"}))
    with unchanged(store):
        found = backend.message_get(MessageRef("q", sent))
    assert found is not None
    assert (found.state, found.attempt, found.body, found.headers) == (
        "ready", 0, {"claim": 1}, {"h": "v"})
    [row] = claim(backend, "q")
    backend.message_nack(NackParams(receipt("q", row), "first failure", delay=0.0))
    claim(backend, "q", lease=LEASE)
    outlive()
    with unchanged(store):  # dead by rule 13 before any upkeep: shown so, nothing written
        found = backend.message_get(MessageRef("q", sent))
    assert found is not None
    assert (found.state, found.attempt) == ("dead", 2)
    assert [e.error for e in found.errors] == ["first failure", "lease expired"]
    assert found.dead_at is not None
    assert backend.message_get(MessageRef("other", sent)) is None


def test_message_get_of_a_leased_message_shows_its_lease(store: Store) -> None:
    save(store.backend, "q")
    [sent] = send(store.backend, "q", 1)
    [row] = claim(store.backend, "q", lease=30)
    found = store.backend.message_get(MessageRef("q", sent))
    assert found is not None
    assert (found.state, found.attempt, found.lease_until) == ("leased", 1, row.lease_until)


def test_deleting_a_leased_message_loses_its_lease_and_is_counted_as_purged(
        store: Store) -> None:
    backend = store.backend
    save(backend, "q")
    sent = send(backend, "q", 1, 2)
    [row] = claim(backend, "q")
    assert backend.message_delete(MessageRef("q", row.id))
    assert not backend.message_delete(MessageRef("q", row.id))
    assert backend.message_ack(AckParams([receipt("q", row)])) == [None]  # LeaseLost
    stats = backend.queue_stats(QueueRef("q"))
    assert (stats.sent, stats.acked, stats.ready) == (2, 0, 1)
    [rest] = claim(backend, "q")
    backend.message_ack(AckParams([receipt("q", rest)]))
    assert backend.queue_stats(QueueRef("q")).acked == 1
    assert rest.id == sent[1]


def test_deleting_the_head_of_a_key_frees_the_next(store: Store) -> None:
    backend = store.backend
    save(backend, "q")
    first, second = send(backend, "q", 1, 2, ordering_key="k")
    [row] = claim(backend, "q", 5)
    assert row.id == first
    assert backend.message_delete(MessageRef("q", first))
    [row] = claim(backend, "q", 5)
    assert row.id == second


def test_deleting_a_parked_head_frees_its_key(store: Store) -> None:
    backend = store.backend
    save(backend, "q", on_dead="park")
    first, second = send(backend, "q", 1, 2, ordering_key="k")
    [row] = claim(backend, "q")
    backend.message_nack(NackParams(receipt("q", row), "boom", outcome="dead"))
    assert claim(backend, "q") == []  # parked
    assert backend.message_delete(MessageRef("q", first))
    assert [r.id for r in claim(backend, "q")] == [second]
    assert backend.queue_stats(QueueRef("q")).parked_keys == []
