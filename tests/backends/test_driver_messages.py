"""The seam's message path on every backend: send, claim, ack, nack, extend, and the ack
that commits with an effect (SPEC rules 2-10, 13, 16, 17, 22).

Each test calls the backend directly with the params objects the public API builds.
"""

from __future__ import annotations

import contextlib
from typing import Any, cast

import pytest

import hailq
from hailq.backends.base import (
    AckParams,
    AckTransactionParams,
    Backend,
    ClaimParams,
    DeadListParams,
    ExtendParams,
    NackOutcome,
    NackParams,
    PeekParams,
    QueueRef,
    RedriveParams,
    SendParams,
)
from hailq.codec import encode_body

from .conftest import (
    LEASE,
    Store,
    caller_transaction,
    claim,
    lapsed,
    message,
    outlive,
    pass_time,
    receipt,
    save,
    send,
)


def states(backend: Backend, queue: str) -> dict[str, str]:
    return {p.id: p.state for p in backend.message_peek(PeekParams(queue, limit=100))}


# -- sending ------------------------------------------------------------------------------------


def test_send_stores_one_message_ready_with_its_fields(backend: Backend) -> None:
    save(backend, "q")
    m = message("q", {"n": 1}, priority=3, headers='{"kind":"order"}')
    assert backend.message_send(SendParams([m])) == [m.id]
    [p] = backend.message_peek(PeekParams("q"))
    assert (p.id, p.state, p.body, p.headers, p.priority, p.attempt) == (
        m.id, "ready", {"n": 1}, {"kind": "order"}, 3, 0)
    assert abs(p.enqueued_at - backend.clock_now()) < 5
    assert backend.queue_stats(QueueRef("q")).sent == 1


def test_send_batch_returns_ids_in_order_and_claims_come_in_send_order(
        backend: Backend) -> None:
    save(backend, "q")
    batch = [message("q", n) for n in range(5)]
    assert backend.message_send(SendParams(batch)) == [m.id for m in batch]
    assert [r.id for r in claim(backend, "q", 10)] == [m.id for m in batch]
    assert backend.queue_stats(QueueRef("q")).sent == 5


def test_send_batch_is_all_or_nothing(backend: Backend) -> None:
    save(backend, "q")
    good = message("q", "good")
    broken = message("q", "broken")._replace(body_kind=cast(int, None))  # NOT NULL fails
    with pytest.raises(hailq.StorageError):
        backend.message_send(SendParams([good, broken]))
    assert backend.message_peek(PeekParams("q")) == []
    assert backend.queue_stats(QueueRef("q")).sent == 0


def test_send_dedup_returns_the_first_id_and_inserts_nothing(backend: Backend) -> None:
    save(backend, "q")
    first = message("q", "first", dedup_id="order-7")
    second = message("q", "second", dedup_id="order-7")
    assert backend.message_send(SendParams([first])) == [first.id]
    assert backend.message_send(SendParams([second])) == [first.id]
    assert [p.id for p in backend.message_peek(PeekParams("q"))] == [first.id]
    assert backend.queue_stats(QueueRef("q")).sent == 1


def test_send_dedup_within_one_batch_and_only_within_its_queue(backend: Backend) -> None:
    save(backend, "q")
    save(backend, "other")
    a, b = message("q", "a", dedup_id="d"), message("q", "b", dedup_id="d")
    assert backend.message_send(SendParams([a, b])) == [a.id, a.id]
    elsewhere = message("other", "c", dedup_id="d")
    assert backend.message_send(SendParams([elsewhere])) == [elsewhere.id]
    assert [p.id for p in backend.message_peek(PeekParams("q"))] == [a.id]
    assert [p.id for p in backend.message_peek(PeekParams("other"))] == [elsewhere.id]


def test_send_delay_is_not_claimable_before_due(backend: Backend) -> None:
    save(backend, "q")
    [later] = send(backend, "q", "later", delay=0.25)
    assert claim(backend, "q") == []
    [p] = backend.message_peek(PeekParams("q"))
    assert p.state == "scheduled"
    assert p.available_at == pytest.approx(p.enqueued_at + 0.25, abs=0.01)
    pass_time(0.35)
    assert [r.id for r in claim(backend, "q")] == [later]


def test_send_ordering_key_blocks_the_second_until_the_first_is_acked(
        backend: Backend) -> None:
    save(backend, "q")
    a1, a2 = message("q", "a1", ordering_key="a"), message("q", "a2", ordering_key="a")
    b1, free = message("q", "b1", ordering_key="b"), message("q", "free")
    backend.message_send(SendParams([a1, a2, b1]))  # a2 behind a1 within one batch
    backend.message_send(SendParams([free]))
    assert states(backend, "q")[a2.id] == "blocked"
    assert backend.queue_stats(QueueRef("q")).blocked == 1
    got = claim(backend, "q", 10)
    assert [r.id for r in got] == [a1.id, b1.id, free.id]  # other keys and no key flow
    assert claim(backend, "q", 10) == []
    assert backend.message_ack(AckParams([receipt("q", got[0])])) == [False]
    assert [r.id for r in claim(backend, "q", 10)] == [a2.id]


def test_send_ordering_key_sent_later_waits_behind_a_leased_head(backend: Backend) -> None:
    save(backend, "q")
    [head] = send(backend, "q", "head", ordering_key="k")
    [r] = claim(backend, "q")
    [tail] = send(backend, "q", "tail", ordering_key="k")
    assert states(backend, "q")[tail] == "blocked"
    assert claim(backend, "q", 10) == []
    assert backend.message_nack(NackParams(receipt("q", r), "nope", delay=0.0))
    assert [x.id for x in claim(backend, "q", 10)] == [head]  # the head again, not the tail


def test_a_dead_head_lets_its_key_flow_on(backend: Backend) -> None:
    save(backend, "q", on_dead="continue")
    first, second = send(backend, "q", "first", "second", ordering_key="k")
    [r] = claim(backend, "q", 10)
    assert backend.message_nack(NackParams(receipt("q", r), "poison", outcome="dead"))
    assert [x.id for x in claim(backend, "q", 10)] == [second]
    assert [d.id for d in backend.dead_list(DeadListParams("q"))] == [first]


def test_a_dead_head_of_a_parking_queue_holds_its_key_until_redriven(
        backend: Backend) -> None:
    save(backend, "q", on_dead="park")
    first, second = send(backend, "q", "first", "second", ordering_key="k")
    [r] = claim(backend, "q", 10)
    assert backend.message_nack(NackParams(receipt("q", r), "poison", outcome="dead"))
    assert claim(backend, "q", 10) == []
    assert backend.queue_stats(QueueRef("q")).parked_keys == ["k"]
    [dead] = backend.dead_list(DeadListParams("q"))
    assert dead.parked
    assert backend.dead_redrive(RedriveParams("q", ids=[first])) == 1
    assert backend.queue_stats(QueueRef("q")).parked_keys == []
    assert [x.id for x in claim(backend, "q", 10)] == [first]  # key order kept
    assert states(backend, "q")[second] == "blocked"


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
@pytest.mark.parametrize("style", ["explicit", "implicit"])
@pytest.mark.parametrize("options", [{}, {"ordering_key": "k"}, {"dedup_id": "d"}],
                         ids=["plain", "keyed", "dedup"])
def test_send_with_a_connection_exists_if_and_only_if_it_commits(
        store: Store, options: dict[str, Any], style: str, commit: bool,
        request: pytest.FixtureRequest) -> None:
    backend = store.backend
    save(backend, "q")
    m = message("q", "outbox", **options)
    with caller_transaction(store, style, commit) as conn:
        assert backend.message_send(SendParams([m], conn)) == [m.id]
    assert [p.id for p in backend.message_peek(PeekParams("q"))] == ([m.id] if commit else [])
    assert backend.queue_stats(QueueRef("q")).sent == (1 if commit else 0)


# -- claiming -----------------------------------------------------------------------------------


def test_claim_takes_the_highest_priority_first_then_send_order(backend: Backend) -> None:
    save(backend, "q")
    batch = [message("q", i, priority=p) for i, p in enumerate([0, 5, 9, 5, 1])]
    backend.message_send(SendParams(batch))
    got = claim(backend, "q", 10)
    assert [r.priority for r in got] == [9, 5, 5, 1, 0]
    assert [r.id for r in got if r.priority == 5] == [batch[1].id, batch[3].id]
    assert [(r.sort_key, r.seq) for r in got] == sorted((r.sort_key, r.seq) for r in got)


def test_claim_with_aging_serves_old_low_priority_work_first(backend: Backend) -> None:
    aging = 0.1
    for queue in ("fresh", "old"):
        save(backend, queue, aging=aging)
    low_fresh = message("fresh", "low", priority=0)
    high_fresh = message("fresh", "high", priority=1)
    backend.message_send(SendParams([low_fresh, high_fresh]))
    low_old = message("old", "low", priority=0)
    backend.message_send(SendParams([low_old]))
    pass_time(2 * aging)  # more than one level of aging later
    high_late = message("old", "high", priority=1)
    backend.message_send(SendParams([high_late]))
    assert [r.id for r in claim(backend, "fresh", 2)] == [high_fresh.id, low_fresh.id]
    assert [r.id for r in claim(backend, "old", 2)] == [low_old.id, high_late.id]


def test_claim_returns_the_row_with_attempt_token_and_position(backend: Backend) -> None:
    save(backend, "q")
    m = message("q", {"n": 1}, priority=4, ordering_key="k")
    backend.message_send(SendParams([m]))
    [r] = claim(backend, "q", lease=LEASE)
    now = backend.clock_now()
    assert (r.id, r.body, r.body_kind, r.priority, r.ordering_key, r.attempt) == (
        m.id, encode_body({"n": 1}, 1 << 20)[0], m.body_kind, 4, "k", 1)
    assert isinstance(r.token, str) and r.token
    assert isinstance(r.seq, int)
    assert r.lease_until == pytest.approx(now + LEASE, abs=0.1)
    assert abs(r.enqueued_at - now) < 5
    outlive()
    [again] = claim(backend, "q")
    assert (again.id, again.seq, again.attempt) == (m.id, r.seq, 2)
    assert again.token != r.token  # every receive makes a new lease
    assert backend.queue_stats(QueueRef("q")).redelivered == 1


def test_claim_respects_max_messages_and_leases_each_message_once(backend: Backend) -> None:
    save(backend, "q")
    ids = send(backend, "q", *range(5))
    first = claim(backend, "q", 2)
    second = claim(backend, "q", 10)
    assert len(first) == 2 and len(second) == 3
    assert sorted(r.id for r in first + second) == sorted(ids)
    assert claim(backend, "q", 10) == []


@pytest.mark.parametrize("upkeep", ["just_done", "due"])
def test_claim_acks_in_the_same_call_with_an_answer_per_ack(
        backend: Backend, upkeep: str) -> None:
    save(backend, "q")
    save(backend, "other")
    m1, m2, m3, m4 = send(backend, "q", 1, 2, 3, 4)
    stale, current = lapsed(backend, "q")
    assert current.message_id == m1
    r2, r3 = claim(backend, "q", 2)
    assert (r2.id, r3.id) == (m2, m3)
    send(backend, "other", "o")
    [r_other] = claim(backend, "other")
    if upkeep == "just_done":
        backend.queue_maintain(QueueRef("q"))
    else:
        pass_time(0.1)
    acks = [current, stale, receipt("q", r2), receipt("other", r3), receipt("other", r_other)]
    result = backend.message_claim(ClaimParams("q", 5, acks=acks))
    assert result.acked == [False, None, False, None, False]
    assert [r.id for r in result.rows] == [m4]
    assert backend.message_ack(AckParams([current])) == [None]  # gone
    assert backend.message_ack(AckParams([receipt("q", r3)])) == [False]  # was still leased
    assert backend.message_peek(PeekParams("other")) == []


@pytest.mark.parametrize("upkeep", ["just_done", "due"])
def test_claim_never_hands_back_a_message_it_acked_late(backend: Backend, upkeep: str) -> None:
    save(backend, "q")
    send(backend, "q", "late")
    [r] = claim(backend, "q", lease=LEASE)
    outlive()
    # the message is ready again; nobody received it since
    backend.queue_maintain(QueueRef("q"))
    if upkeep == "due":
        pass_time(0.1)
    result = backend.message_claim(ClaimParams("q", 5, acks=[receipt("q", r)]))
    assert result.acked == [True]
    assert result.rows == []
    stats = backend.queue_stats(QueueRef("q"))
    assert (stats.late_acks, stats.acked, stats.ready) == (1, 1, 0)


# -- acking -------------------------------------------------------------------------------------


def test_ack_batch_mixing_stale_and_current_receipts_of_one_message(backend: Backend) -> None:
    save(backend, "q")
    send(backend, "q", "x")
    stale, current = lapsed(backend, "q")
    assert backend.message_ack(AckParams([stale, current])) == [None, False]
    assert backend.message_peek(PeekParams("q")) == []


def test_ack_current_then_stale_in_one_batch(backend: Backend) -> None:
    save(backend, "q")
    send(backend, "q", "x")
    stale, current = lapsed(backend, "q")
    assert backend.message_ack(AckParams([current, stale])) == [False, None]


def test_ack_a_stale_receipt_alone_changes_nothing(backend: Backend) -> None:
    save(backend, "q")
    send(backend, "q", "x")
    stale, current = lapsed(backend, "q")
    assert backend.message_ack(AckParams([stale])) == [None]
    assert list(states(backend, "q").values()) == ["leased"]
    assert backend.message_ack(AckParams([current])) == [False]


def test_ack_stale_receipt_of_one_claim_beside_current_of_another(backend: Backend) -> None:
    """Two messages leased together twice: a stale receipt of the first beside the current
    one of the second must not ack the first (the rows share a claim's token)."""
    save(backend, "q")
    m1, m2 = send(backend, "q", 1, 2)
    old = claim(backend, "q", 2, lease=LEASE)
    outlive()
    new = claim(backend, "q", 2, lease=30)
    assert [r.id for r in new] == [m1, m2]
    answer = backend.message_ack(AckParams([receipt("q", old[0]), receipt("q", new[1])]))
    assert answer == [None, False]
    assert states(backend, "q") == {m1: "leased"}
    assert backend.message_ack(AckParams([receipt("q", new[0])])) == [False]


def test_ack_a_whole_claim_in_one_batch(backend: Backend) -> None:
    save(backend, "q")
    send(backend, "q", *range(4))
    got = claim(backend, "q", 4)
    assert backend.message_ack(AckParams([receipt("q", r) for r in got])) == [False] * 4
    assert backend.message_peek(PeekParams("q")) == []
    assert backend.queue_stats(QueueRef("q")).acked == 4


@pytest.mark.parametrize("batch", [1, 2], ids=["one by one", "one claim"])
def test_ack_of_keyed_messages_frees_each_key_once_and_in_order(
        backend: Backend, batch: int) -> None:
    """Rule 17 through acks one by one and of a whole claim, before and after an ack
    found a key in the queue: each ack frees its key's next message, a keyed queue's
    message without a key is acked too, and a delayed successor waits its turn."""
    save(backend, "q")
    a1, b1, free = message("q", "a1", ordering_key="a"), message("q", "b1", ordering_key="b"), \
        message("q", "free")
    a2, b2 = message("q", "a2", ordering_key="a"), message("q", "b2", ordering_key="b", delay=60.0)
    a3 = message("q", "a3", ordering_key="a")
    backend.message_send(SendParams([a1, b1, free, a2, b2, a3]))
    for _ in range(2):  # the second round finds the queue known to hold keys
        got = claim(backend, "q", 10)
        receipts = [receipt("q", r) for r in got]
        for start in range(0, len(receipts), batch):
            assert backend.message_ack(AckParams(receipts[start:start + batch])) == \
                [False] * len(receipts[start:start + batch])
        if got[0].id == a1.id:
            assert [r.id for r in got] == [a1.id, b1.id, free.id]
            assert states(backend, "q") == {a2.id: "ready", b2.id: "scheduled",
                                            a3.id: "blocked"}
    assert [r.id for r in got] == [a2.id]
    assert states(backend, "q") == {b2.id: "scheduled", a3.id: "ready"}
    assert backend.queue_stats(QueueRef("q")).acked == 4


def test_ack_of_one_claims_keyed_messages_frees_each_successor(backend: Backend) -> None:
    """A whole claim of keyed heads acked in one batch, after an earlier ack found a key
    in the queue (so a dialect that guesses which queues hold keys guesses right)."""
    save(backend, "q")
    [first] = send(backend, "q", "first", ordering_key="w")
    [w] = claim(backend, "q")
    assert w.id == first
    assert backend.message_ack(AckParams([receipt("q", w)])) == [False]
    a1, b1, c1 = (message("q", k + "1", ordering_key=k) for k in "abc")
    free, a2 = message("q", "free"), message("q", "a2", ordering_key="a")
    b2 = message("q", "b2", ordering_key="b", delay=60.0)
    backend.message_send(SendParams([a1, b1, c1, free, a2, b2]))
    got = claim(backend, "q", 10)
    assert [r.id for r in got] == [a1.id, b1.id, c1.id, free.id]
    assert backend.message_ack(AckParams([receipt("q", r) for r in got])) == [False] * 4
    assert states(backend, "q") == {a2.id: "ready", b2.id: "scheduled"}
    assert [r.id for r in claim(backend, "q", 10)] == [a2.id]


def test_ack_of_one_claims_keyed_messages_with_one_already_acked(backend: Backend) -> None:
    """A batch of one claim in which one receipt misses: the other is acked and frees its
    key once, and the missed one's key is not freed a second time."""
    save(backend, "q")
    a1, b1 = message("q", "a1", ordering_key="a"), message("q", "b1", ordering_key="b")
    a2, b2 = message("q", "a2", ordering_key="a"), message("q", "b2", ordering_key="b")
    a3 = message("q", "a3", ordering_key="a")
    backend.message_send(SendParams([a1, b1, a2, b2, a3]))
    ra, rb = (receipt("q", r) for r in claim(backend, "q", 10))
    assert backend.message_ack(AckParams([ra])) == [False]
    assert backend.message_ack(AckParams([ra, rb])) == [None, False]
    assert states(backend, "q") == {a2.id: "ready", b2.id: "ready", a3.id: "blocked"}
    assert [r.id for r in claim(backend, "q", 10)] == [a2.id, b2.id]


def test_ack_duplicates_of_one_receipt_answer_alike(backend: Backend) -> None:
    save(backend, "q")
    send(backend, "q", 1, 2)
    r1, r2 = (receipt("q", r) for r in claim(backend, "q", 2))
    assert backend.message_ack(AckParams([r1, r1])) == [False, False]
    assert backend.message_ack(AckParams([r2, r1, r2])) == [False, None, False]
    stats = backend.queue_stats(QueueRef("q"))
    assert (stats.acked, stats.late_acks) == (2, 0)


def test_ack_receipts_without_a_position(backend: Backend) -> None:
    save(backend, "q")
    send(backend, "q", 1, 2, 3)
    got = claim(backend, "q", 3)
    one = receipt("q", got[0], seq=False)
    assert backend.message_ack(AckParams([one])) == [False]
    rest = [receipt("q", r, seq=False) for r in got[1:]]
    assert backend.message_ack(AckParams([*rest, one])) == [False, False, None]
    assert backend.message_peek(PeekParams("q")) == []


def test_ack_stale_receipt_without_a_position_is_lost(backend: Backend) -> None:
    save(backend, "q")
    send(backend, "q", "x")
    stale, current = lapsed(backend, "q")
    answer = backend.message_ack(AckParams([stale._replace(seq=None),
                                            current._replace(seq=None)]))
    assert answer == [None, False]


def test_ack_receipt_naming_another_queue_is_lost(backend: Backend) -> None:
    save(backend, "q")
    save(backend, "other")
    send(backend, "q", "x")
    [r] = claim(backend, "q")
    for wrong in (receipt("other", r), receipt("other", r, seq=False)):
        assert backend.message_ack(AckParams([wrong])) == [None]
    assert backend.message_ack(AckParams([receipt("q", r)])) == [False]


@pytest.mark.parametrize("call", ["ack", "claim"])
def test_ack_receipt_of_another_queue_beside_the_current_one_is_lost(
        backend: Backend, call: str) -> None:
    save(backend, "q")
    save(backend, "other")
    send(backend, "q", "x")
    [r] = claim(backend, "q")
    batch = [receipt("q", r), receipt("other", r)]
    if call == "ack":
        assert backend.message_ack(AckParams(batch)) == [False, None]
    else:
        assert backend.message_claim(ClaimParams("q", 1, acks=batch)).acked == [False, None]


def test_ack_of_one_claim_with_a_receipt_naming_another_queue(backend: Backend) -> None:
    """Two messages of one claim: the receipt that names another queue is lost, and its
    message stays leased, though the batch otherwise looks like one claim's."""
    save(backend, "q")
    save(backend, "other")
    _, y = send(backend, "q", "x", "y")
    rx, ry = claim(backend, "q", 2)
    assert backend.message_ack(AckParams([receipt("q", rx), receipt("other", ry)])) == [
        False, None]
    assert states(backend, "q") == {y: "leased"}


def test_ack_answers_are_booleans_or_none(backend: Backend) -> None:
    """The seam promises ``bool | None`` per receipt, not a database's 0 and 1."""
    save(backend, "q")
    send(backend, "q", 1, 2, 3, 4)
    late, in_time, alone, pair = claim(backend, "q", 4, lease=LEASE)
    backend.message_extend(ExtendParams([receipt("q", r) for r in (in_time, alone, pair)], 30))
    outlive()
    answers = [
        *backend.message_ack(AckParams([receipt("q", late)])),
        *backend.message_ack(AckParams([receipt("q", alone, seq=False)])),
        *backend.message_ack(AckParams([receipt("q", in_time), receipt("q", pair, seq=False)])),
    ]
    assert answers == [True, False, False, False]
    assert [type(a) for a in answers] == [bool] * 4


def test_ack_late_before_anyone_received_again_succeeds(backend: Backend) -> None:
    save(backend, "q")
    send(backend, "q", "late", "in time")
    late, in_time = claim(backend, "q", 2, lease=LEASE)
    backend.message_extend(ExtendParams([receipt("q", in_time)], 30))
    outlive()
    answer = backend.message_ack(AckParams([receipt("q", late), receipt("q", in_time)]))
    assert answer == [True, False]
    stats = backend.queue_stats(QueueRef("q"))
    assert (stats.late_acks, stats.acked, stats.ready, stats.in_flight) == (1, 2, 0, 0)


def test_ack_late_after_upkeep_gave_the_message_back_succeeds(backend: Backend) -> None:
    save(backend, "q")
    send(backend, "q", "late")
    [r] = claim(backend, "q", lease=LEASE)
    outlive()
    backend.queue_maintain(QueueRef("q"))
    assert backend.message_ack(AckParams([receipt("q", r)])) == [True]
    assert backend.message_peek(PeekParams("q")) == []
    assert backend.queue_stats(QueueRef("q")).late_acks == 1


# -- nacking ------------------------------------------------------------------------------------


def test_nack_stale_receipt_is_lost_and_changes_nothing(backend: Backend) -> None:
    save(backend, "q")
    send(backend, "q", "x")
    stale, current = lapsed(backend, "q")
    assert backend.message_nack(NackParams(stale, "late")) is False
    [p] = backend.message_peek(PeekParams("q"))
    assert (p.state, p.attempt) == ("leased", 2)
    assert backend.queue_stats(QueueRef("q")).nacked == 0
    assert backend.message_nack(NackParams(current, "now", delay=0.0)) is True
    assert backend.message_nack(NackParams(current, "twice")) is False  # its lease ended


def test_nack_retry_without_delay_follows_the_queues_retry_policy(backend: Backend) -> None:
    save(backend, "q", max_attempts=5,
         retry={"base": 15.0, "factor": 4.0, "max": 100.0, "jitter": 0.0})
    [m] = send(backend, "q", "flaky")
    [r] = claim(backend, "q")
    now = backend.clock_now()
    assert backend.message_nack(NackParams(receipt("q", r), "one"))
    [p] = backend.message_peek(PeekParams("q"))
    assert (p.id, p.state, p.attempt) == (m, "scheduled", 1)
    assert p.available_at == pytest.approx(now + 15, abs=2)  # base
    assert claim(backend, "q") == []
    stats = backend.queue_stats(QueueRef("q"))
    assert (stats.nacked, stats.scheduled, stats.ready) == (1, 1, 0)


def test_nack_backoff_grows_per_attempt_up_to_its_max(backend: Backend) -> None:
    save(backend, "q", retry={"base": 15.0, "factor": 4.0, "max": 100.0, "jitter": 0.0})
    send(backend, "q", "x")
    for attempt in (1, 2):
        [r] = claim(backend, "q")
        assert r.attempt == attempt
        assert backend.message_nack(NackParams(receipt("q", r), "e", delay=0.0))
    [r] = claim(backend, "q")
    now = backend.clock_now()
    assert backend.message_nack(NackParams(receipt("q", r), "e"))
    [p] = backend.message_peek(PeekParams("q"))
    assert p.state == "scheduled"
    assert p.available_at == pytest.approx(now + 100, abs=2)  # 15 * 4 ** 2 = 240 > max


def test_nack_backoff_takes_its_jitter_off_the_delay(backend: Backend) -> None:
    save(backend, "q", retry={"base": 100.0, "factor": 1.0, "max": 100.0, "jitter": 0.5})
    send(backend, "q", "x")
    [r] = claim(backend, "q")
    now = backend.clock_now()
    assert backend.message_nack(NackParams(receipt("q", r), "e"))
    [p] = backend.message_peek(PeekParams("q"))
    assert now + 50 - 2 <= p.available_at <= now + 100 + 2


def test_nack_explicit_delay_wins_over_the_backoff(backend: Backend) -> None:
    save(backend, "q", retry={"base": 60.0, "max": 60.0, "jitter": 0.0})
    send(backend, "q", "x")
    [r] = claim(backend, "q")
    assert backend.message_nack(NackParams(receipt("q", r), "e", delay=0.0))
    [p] = backend.message_peek(PeekParams("q"))
    assert p.state == "ready"
    [r] = claim(backend, "q")
    assert backend.message_nack(NackParams(receipt("q", r), "e", delay=0.25))
    assert backend.message_peek(PeekParams("q"))[0].state == "scheduled"
    pass_time(0.35)
    assert [x.attempt for x in claim(backend, "q")] == [3]


def test_nack_retry_on_the_last_attempt_kills(backend: Backend) -> None:
    save(backend, "q", max_attempts=2)
    [m] = send(backend, "q", "poison")
    [r] = claim(backend, "q")
    assert backend.message_nack(NackParams(receipt("q", r), "first", delay=0.0))
    [r] = claim(backend, "q")
    assert backend.message_nack(NackParams(receipt("q", r), "second", delay=0.0))
    assert claim(backend, "q") == []
    [dead] = backend.dead_list(DeadListParams("q"))
    assert (dead.id, dead.attempt) == (m, 2)
    assert [(e.attempt, e.error) for e in dead.errors] == [(1, "first"), (2, "second")]
    stats = backend.queue_stats(QueueRef("q"))
    assert (stats.dead, stats.nacked, stats.dead_lettered) == (1, 2, 1)


def test_nack_dead_dead_letters_at_once(backend: Backend) -> None:
    save(backend, "q", max_attempts=5)
    [m] = send(backend, "q", "poison")
    [r] = claim(backend, "q")
    before = backend.clock_now()
    assert backend.message_nack(NackParams(receipt("q", r), "bad input", outcome="dead"))
    assert claim(backend, "q") == []
    [dead] = backend.dead_list(DeadListParams("q"))
    assert (dead.id, dead.attempt, dead.last_error) == (m, 1, "bad input")
    assert dead.dead_at == pytest.approx(before, abs=2)
    stats = backend.queue_stats(QueueRef("q"))
    assert (stats.dead, stats.dead_lettered, stats.nacked) == (1, 1, 1)


def test_nack_give_back_never_kills_on_the_last_attempt_while_the_lease_holds(
        backend: Backend) -> None:
    save(backend, "q", max_attempts=1)
    [m] = send(backend, "q", "untried")
    [r] = claim(backend, "q")
    assert backend.message_nack(NackParams(receipt("q", r), "shutting down",
                                           outcome="give_back", delay=0.0))
    [p] = backend.message_peek(PeekParams("q"))
    assert (p.id, p.state) == (m, "ready")
    assert backend.dead_list(DeadListParams("q")) == []
    assert [x.id for x in claim(backend, "q")] == [m]


def test_nack_give_back_after_the_last_attempt_ended_is_lost(backend: Backend) -> None:
    save(backend, "q", max_attempts=1)
    send(backend, "q", "x")
    [r] = claim(backend, "q", lease=LEASE)
    outlive()
    assert backend.message_nack(NackParams(receipt("q", r), "late", outcome="give_back",
                                           delay=0.0)) is False
    assert backend.queue_stats(QueueRef("q")).dead == 1


def test_nack_give_back_keeps_its_place_in_line(backend: Backend) -> None:
    save(backend, "q", aging=10.0)
    first = message("q", "first")
    second = message("q", "second")
    backend.message_send(SendParams([first]))
    pass_time(0.02)
    backend.message_send(SendParams([second]))
    [r] = claim(backend, "q")
    assert r.id == first.id
    assert backend.message_nack(NackParams(receipt("q", r), "back", outcome="give_back",
                                           delay=0.0))
    [r] = claim(backend, "q")
    assert r.id == first.id  # still ahead of the second
    # A retry goes to the back: with aging its sort key is the time it is due again.
    assert backend.message_nack(NackParams(receipt("q", r), "retry", delay=0.0))
    assert [x.id for x in claim(backend, "q", 2)] == [second.id, first.id]


def test_nack_after_upkeep_killed_the_last_attempt_is_lost(backend: Backend) -> None:
    save(backend, "q", max_attempts=1)
    send(backend, "q", "x")
    [r] = claim(backend, "q", lease=LEASE)
    outlive()
    backend.queue_maintain(QueueRef("q"))
    assert backend.message_nack(NackParams(receipt("q", r), "late", delay=0.0)) is False
    [dead] = backend.dead_list(DeadListParams("q"))
    assert dead.last_error == "lease expired"
    stats = backend.queue_stats(QueueRef("q"))
    assert (stats.nacked, stats.dead_lettered) == (0, 1)


@pytest.mark.parametrize("outcome", ["retry", "dead"])
def test_nack_of_an_ended_last_attempt_is_lost_before_upkeep_too(
        backend: Backend, outcome: str) -> None:
    save(backend, "q", max_attempts=1)
    send(backend, "q", "x")
    [r] = claim(backend, "q", lease=LEASE)
    outlive()
    assert backend.message_nack(NackParams(receipt("q", r), "late",
                                           outcome=cast(NackOutcome, outcome),
                                           delay=0.0)) is False
    [dead] = backend.dead_list(DeadListParams("q"))
    assert dead.last_error == "lease expired"
    assert backend.queue_stats(QueueRef("q")).nacked == 0


# -- extending ----------------------------------------------------------------------------------


def test_extend_batch_mixing_stale_and_current_receipts(backend: Backend) -> None:
    save(backend, "q")
    send(backend, "q", "x")
    stale, current = lapsed(backend, "q")
    now = backend.clock_now()
    gone, moved = backend.message_extend(ExtendParams([stale, current], 60))
    assert gone is None
    assert moved == pytest.approx(now + 60, abs=2)


def test_extend_moves_the_end_of_the_lease(backend: Backend) -> None:
    save(backend, "q")
    send(backend, "q", "x")
    [r] = claim(backend, "q", lease=LEASE)
    [until] = backend.message_extend(ExtendParams([receipt("q", r)], 30))
    assert until is not None and until > r.lease_until + 20
    outlive()
    assert claim(backend, "q") == []  # still leased
    assert backend.message_ack(AckParams([receipt("q", r)])) == [False]


def test_extend_ended_lease_nobody_took_since_holds_again(backend: Backend) -> None:
    save(backend, "q", max_attempts=5)
    send(backend, "q", "x")
    [r] = claim(backend, "q", lease=LEASE)
    outlive()
    [until] = backend.message_extend(ExtendParams([receipt("q", r, seq=False)], 30))
    assert until is not None
    assert claim(backend, "q") == []
    assert backend.message_ack(AckParams([receipt("q", r)])) == [False]


def test_extend_ended_lease_of_the_last_attempt_is_lost(backend: Backend) -> None:
    save(backend, "q", max_attempts=1)
    send(backend, "q", "x")
    [r] = claim(backend, "q", lease=LEASE)
    outlive()
    assert backend.message_extend(ExtendParams([receipt("q", r)], 30)) == [None]
    backend.queue_maintain(QueueRef("q"))
    assert backend.message_extend(ExtendParams([receipt("q", r)], 30)) == [None]
    assert backend.queue_stats(QueueRef("q")).dead == 1


# -- the ack that commits with an effect (rule 22) ----------------------------------------------


def _effect_table(store: Store) -> None:
    conn = store.connect()
    try:
        conn.execute(f"CREATE TABLE {store.table} (note text)")
        conn.commit()
    finally:
        conn.close()


def _effects(store: Store) -> int:
    conn = store.connect()
    try:
        return int(conn.execute(f"SELECT count(*) FROM {store.table}").fetchone()[0])
    finally:
        conn.close()


def test_ack_transaction_commits_the_effect_with_the_ack(store: Store) -> None:
    backend = store.backend
    _effect_table(store)
    save(backend, "q")
    send(backend, "q", "x")
    [r] = claim(backend, "q")
    with backend.message_ack_transaction(AckTransactionParams(receipt("q", r))) as conn:
        conn.execute(f"INSERT INTO {store.table} VALUES ('done')")
    assert _effects(store) == 1
    assert backend.message_peek(PeekParams("q")) == []
    assert backend.message_ack(AckParams([receipt("q", r)])) == [None]
    assert backend.queue_stats(QueueRef("q")).acked == 1


def test_ack_transaction_raising_inside_rolls_the_ack_back(store: Store) -> None:
    backend = store.backend
    _effect_table(store)
    save(backend, "q")
    send(backend, "q", "x")
    [r] = claim(backend, "q")
    with pytest.raises(RuntimeError, match="handler failed"), \
            backend.message_ack_transaction(AckTransactionParams(receipt("q", r))) as conn:
        conn.execute(f"INSERT INTO {store.table} VALUES ('half')")
        raise RuntimeError("handler failed")
    assert _effects(store) == 0
    assert list(states(backend, "q").values()) == ["leased"]
    assert backend.message_ack(AckParams([receipt("q", r)])) == [False]


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
def test_ack_transaction_of_a_keyed_message_frees_its_key_if_and_only_if_it_commits(
        store: Store, commit: bool) -> None:
    backend = store.backend
    _effect_table(store)
    save(backend, "q")
    for round_ in range(2):  # the second round finds the queue known to hold keys
        head, tail = send(backend, "q", "head", "tail", ordering_key=f"k{round_}")
        [r] = claim(backend, "q")
        assert r.id == head
        with contextlib.suppress(RuntimeError), \
                backend.message_ack_transaction(AckTransactionParams(receipt("q", r))) as conn:
            conn.execute(f"INSERT INTO {store.table} VALUES ('done')")
            if not commit:
                raise RuntimeError("handler failed")
        if commit:
            assert states(backend, "q") == {tail: "ready"}
        else:
            assert states(backend, "q") == {head: "leased", tail: "blocked"}
            assert backend.message_ack(AckParams([receipt("q", r)])) == [False]
        [t] = claim(backend, "q")
        assert t.id == tail
        assert backend.message_ack(AckParams([receipt("q", t)])) == [False]
    assert _effects(store) == (2 if commit else 0)


def test_ack_transaction_with_a_lost_lease_raises_lease_lost(store: Store) -> None:
    backend = store.backend
    _effect_table(store)
    save(backend, "q")
    send(backend, "q", "x")
    stale, current = lapsed(backend, "q")
    ran = False
    with pytest.raises(hailq.LeaseLost), \
            backend.message_ack_transaction(AckTransactionParams(stale)) as conn:
        ran = True
        conn.execute(f"INSERT INTO {store.table} VALUES ('twice')")
    assert not ran
    assert _effects(store) == 0
    assert backend.message_ack(AckParams([current])) == [False]
