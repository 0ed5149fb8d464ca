"""The seam's reads, upkeep and operators' steps on every backend (SPEC rules 8, 13, 14,
25, 30): reads see the queue as the next claim would and write nothing; upkeep makes the
rows say what the reads already showed; redrive, purge and the counters."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import pytest

from hailq.backends.base import (
    AckParams,
    Backend,
    DeadListParams,
    ExtendParams,
    NackParams,
    PeekParams,
    PurgeParams,
    QueueRef,
    RedriveParams,
    WaitParams,
)
from hailq.errors import QueueNotFound
from hailq.models import DeadMessage, PeekedMessage, QueueStats

from .conftest import LEASE, Store, claim, outlive, receipt, save, send, unchanged


@dataclass
class Lapsed:
    """A queue (max_attempts 2) where time alone changed what a claim would find."""

    dead: str  # its lease ended on the last attempt: dead by rule 13
    dead_until: float  # when that lease ended
    back: str  # its lease ended on attempt 1: ready again
    back_until: float
    held: str  # leased, in time
    due: str  # scheduled, and due by now
    later: str  # scheduled, not yet due


def lapsed_queue(backend: Backend) -> Lapsed:
    save(backend, "q", max_attempts=2)
    [dead] = send(backend, "q", "dead", priority=9)
    [back] = send(backend, "q", "back", priority=5)
    [held] = send(backend, "q", "held", priority=1)
    [first] = claim(backend, "q", lease=LEASE)
    outlive()
    [last] = claim(backend, "q", lease=LEASE)
    [once] = claim(backend, "q", lease=LEASE)
    [kept] = claim(backend, "q", lease=30)
    assert [(first.id, first.attempt), (last.id, last.attempt), (once.id, kept.id)] == [
        (dead, 1), (dead, 2), (back, held)]
    [due] = send(backend, "q", "due", delay=0.1)
    [later] = send(backend, "q", "later", delay=60)
    outlive()
    return Lapsed(dead, last.lease_until, back, once.lease_until, held, due, later)


def test_reads_show_ended_leases_as_the_next_claim_would_and_write_nothing(
        store: Store) -> None:
    backend = store.backend
    world = lapsed_queue(backend)
    with unchanged(store):
        stats = backend.queue_stats(QueueRef("q"))
        peeked = backend.message_peek(PeekParams("q", limit=100))
        dead = backend.dead_list(DeadListParams("q"))
    assert (stats.ready, stats.scheduled, stats.in_flight, stats.blocked, stats.dead) == (
        2, 1, 1, 0, 1)
    assert (stats.sent, stats.redelivered, stats.dead_lettered, stats.acked) == (5, 1, 1, 0)
    assert stats.oldest_ready_age is not None and stats.oldest_ready_age > 0
    assert [(p.id, p.state) for p in peeked] == [
        (world.back, "ready"), (world.due, "ready"), (world.later, "scheduled"),
        (world.held, "leased")]
    assert peeked[0].available_at == pytest.approx(world.back_until)
    [d] = dead
    assert (d.id, d.attempt, d.last_error) == (world.dead, 2, "lease expired")
    assert d.dead_at == pytest.approx(world.dead_until)
    assert [(e.attempt, e.error) for e in d.errors] == [(1, "lease expired"),
                                                        (2, "lease expired")]


def test_reads_of_a_queue_nobody_declared_write_nothing(store: Store) -> None:
    backend = store.backend
    with unchanged(store):
        with pytest.raises(QueueNotFound):
            backend.queue_stats(QueueRef("nobody"))
        assert backend.message_peek(PeekParams("nobody")) == []
        assert backend.dead_list(DeadListParams("nobody")) == []
        assert backend.queue_get(QueueRef("nobody")) is None


def _timeless(stats: QueueStats) -> QueueStats:
    return replace(stats, oldest_ready_age=None)


def test_upkeep_writes_what_stats_and_dead_list_showed_before_it(store: Store) -> None:
    backend = store.backend
    world = lapsed_queue(backend)
    stats = backend.queue_stats(QueueRef("q"))
    dead: list[DeadMessage] = backend.dead_list(DeadListParams("q"))
    rows = store.rows()
    backend.queue_maintain(QueueRef("q"))
    assert store.rows() != rows  # upkeep wrote
    assert _timeless(backend.queue_stats(QueueRef("q"))) == _timeless(stats)
    assert backend.dead_list(DeadListParams("q")) == dead
    assert [p.id for p in backend.message_peek(PeekParams("q"))] == [
        world.back, world.due, world.later, world.held]
    assert [x.id for x in claim(backend, "q", 10)] == [world.back, world.due]


def test_upkeep_writes_what_peek_showed_before_it(store: Store) -> None:
    backend = store.backend
    lapsed_queue(backend)
    peeked: list[PeekedMessage] = backend.message_peek(PeekParams("q"))
    backend.queue_maintain(QueueRef("q"))
    assert backend.message_peek(PeekParams("q")) == peeked


def test_upkeep_returns_ended_leases_and_kills_the_last_attempt(store: Store) -> None:
    backend = store.backend
    world = lapsed_queue(backend)
    backend.queue_maintain(QueueRef("q"))
    backend.queue_maintain(QueueRef("q"))  # again: nothing to do, nothing counted twice
    stats = backend.queue_stats(QueueRef("q"))
    assert (stats.ready, stats.dead, stats.dead_lettered) == (2, 1, 1)
    assert [d.id for d in backend.dead_list(DeadListParams("q"))] == [world.dead]


# -- redrive and purge ------------------------------------------------------------------------


def test_dead_redrive_by_ids_then_all(backend: Backend) -> None:
    save(backend, "q", max_attempts=1)
    a, b, c, d = send(backend, "q", "a", "b", "c", "d")
    for r in claim(backend, "q", 3):
        assert backend.message_nack(NackParams(receipt("q", r), "bad", outcome="dead"))
    [r] = claim(backend, "q", lease=LEASE)
    assert r.id == d
    outlive()  # d is dead by its ended last attempt; upkeep has not marked it
    assert backend.dead_redrive(RedriveParams("q", ids=[b])) == 1
    [p] = backend.message_peek(PeekParams("q"))
    assert (p.id, p.state, p.attempt) == (b, "ready", 0)
    assert [x.id for x in backend.dead_list(DeadListParams("q"))] == [a, c, d]
    assert backend.dead_redrive(RedriveParams("q", ids=["01ZZZZZZZZZZZZZZZZZZZZZZZZ"])) == 0
    assert backend.dead_redrive(RedriveParams("q")) == 3
    assert backend.dead_list(DeadListParams("q")) == []
    got = claim(backend, "q", 10)
    assert sorted(x.id for x in got) == sorted([a, b, c, d])
    assert {x.attempt for x in got} == {1}
    assert backend.queue_stats(QueueRef("q")).dead == 0


def test_dead_list_filters(backend: Backend) -> None:
    save(backend, "q", max_attempts=1)
    [keyed] = send(backend, "q", "k", ordering_key="k1")
    [plain] = send(backend, "q", "p")
    for r, error in zip(claim(backend, "q", 2), ("timeout talking to db", "bad input"),
                        strict=True):
        assert backend.message_nack(NackParams(receipt("q", r), error, outcome="dead"))
    assert [x.id for x in backend.dead_list(DeadListParams("q", ordering_key="k1"))] == [keyed]
    assert [x.id for x in backend.dead_list(DeadListParams("q", error_contains="bad"))] == [
        plain]
    assert backend.dead_list(DeadListParams("q", older_than=3600)) == []
    assert len(backend.dead_list(DeadListParams("q", limit=1))) == 1


def test_message_purge_takes_live_or_dead_messages_of_one_queue(backend: Backend) -> None:
    save(backend, "q", max_attempts=1)
    save(backend, "other")
    send(backend, "other", "keep")
    send(backend, "q", "dead", "dead by lease", "leased", "ready")
    dead, lapsing, leased = claim(backend, "q", 3, lease=LEASE)
    assert backend.message_nack(NackParams(receipt("q", dead), "bad", outcome="dead"))
    backend.message_extend(ExtendParams([receipt("q", leased)], 30))
    outlive()  # "dead by lease" ended its last attempt
    assert backend.message_purge(PurgeParams("q")) == 2  # "leased" and "ready"
    stats = backend.queue_stats(QueueRef("q"))
    assert (stats.ready, stats.in_flight, stats.dead) == (0, 0, 2)
    assert backend.message_purge(PurgeParams("q", dead=True)) == 2
    stats = backend.queue_stats(QueueRef("q"))
    assert (stats.dead, stats.sent, stats.acked) == (0, 4, 0)  # purged is not acked
    assert stats.dead_lettered == 2
    assert len(backend.message_peek(PeekParams("other"))) == 1
    assert lapsing.id not in {p.id for p in backend.message_peek(PeekParams("q"))}


def test_purging_a_parked_head_frees_its_key(backend: Backend) -> None:
    save(backend, "q", on_dead="park")
    _, second = send(backend, "q", "first", "second", ordering_key="k")
    [r] = claim(backend, "q", 10)
    assert backend.message_nack(NackParams(receipt("q", r), "poison", outcome="dead"))
    assert claim(backend, "q", 10) == []
    assert backend.message_purge(PurgeParams("q", dead=True)) == 1
    assert [x.id for x in claim(backend, "q", 10)] == [second]


# -- counters -----------------------------------------------------------------------------------


def test_counters_follow_each_outcome(backend: Backend) -> None:
    save(backend, "q", max_attempts=5)
    m1, m2, m3, _, _ = send(backend, "q", 1, 2, 3, 4, 5)

    def figures() -> tuple[int, ...]:
        s = backend.queue_stats(QueueRef("q"))
        return (s.sent, s.acked, s.nacked, s.redelivered, s.dead_lettered, s.late_acks,
                s.ready, s.dead)

    [r] = claim(backend, "q")
    assert r.id == m1
    assert backend.message_ack(AckParams([receipt("q", r)])) == [False]
    assert figures() == (5, 1, 0, 0, 0, 0, 4, 0)
    [r] = claim(backend, "q")
    assert r.id == m2
    assert backend.message_nack(NackParams(receipt("q", r), "e", delay=0.0))
    [r] = claim(backend, "q")
    assert (r.id, r.attempt) == (m2, 2)
    assert backend.message_nack(NackParams(receipt("q", r), "e", outcome="dead"))
    assert figures() == (5, 1, 2, 1, 1, 0, 3, 1)
    [r] = claim(backend, "q", lease=LEASE)
    assert r.id == m3
    outlive()
    assert backend.message_ack(AckParams([receipt("q", r)])) == [True]
    assert figures() == (5, 2, 2, 1, 1, 1, 2, 1)
    assert backend.message_purge(PurgeParams("q")) == 2
    assert figures() == (5, 2, 2, 1, 1, 1, 0, 1)
    assert backend.message_purge(PurgeParams("q", dead=True)) == 1
    assert figures() == (5, 2, 2, 1, 1, 1, 0, 0)


def test_counters_count_redelivery_after_a_lease_ended(backend: Backend) -> None:
    save(backend, "q")
    send(backend, "q", "x")
    claim(backend, "q", lease=LEASE)
    outlive()
    [r] = claim(backend, "q")
    assert r.attempt == 2
    stats = backend.queue_stats(QueueRef("q"))
    assert (stats.redelivered, stats.nacked, stats.in_flight) == (1, 0, 1)


# -- waiting ------------------------------------------------------------------------------------


def test_message_wait_returns_soon_when_a_message_is_ready(backend: Backend) -> None:
    save(backend, "q")
    send(backend, "q", "x")
    started = time.monotonic()
    backend.message_wait(WaitParams(["empty", "q"], 5.0))
    assert time.monotonic() - started < 1.0


def test_message_wait_gives_up_after_its_timeout(backend: Backend) -> None:
    save(backend, "q")
    started = time.monotonic()
    backend.message_wait(WaitParams(["q"], 0.2))
    assert time.monotonic() - started < 1.5
