"""SPEC rules 16-18: priority with and without aging, per-key order, several queues.

Rule 18 runs a real ``hailq.Worker`` over several queues (one slot, so each pick
of the order policy is one message) and checks the order it handled them in.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest

import hailq
from hailq import Envelope

from .helpers import advance, receive_all, wait_until

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
    advance(broker, 0.5)
    q.send("new high", priority=1)

    assert [m.body for m in q.receive(max_messages=2)] == ["new high", "old low"]


def test_rule_16_with_aging_old_low_priority_goes_before_newer_high(broker: hailq.Broker) -> None:
    q = broker.queue("claims", aging=0.2)
    q.send("old low", priority=0)
    advance(broker, 0.5)  # more than one level of aging (0.2 s) later
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
    advance(broker, 0.45)  # more than 3 levels * 0.1 s
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
    advance(broker, 0.35)
    (again,) = q.receive(max_messages=10)
    assert (again.id, again.attempt) == (first, 2)
    advance(broker, 0.3)  # its lease ends: the head comes back, never the second
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


def test_rule_17_acks_alternating_keyed_and_unkeyed_each_answer_and_free_their_key(
        broker: hailq.Broker) -> None:
    # A queue whose acks found keys skips the shortcuts for key-less messages: whatever
    # the mix, one by one or in batches, stale or current, each ack answers for itself.
    q = broker.queue("claims", lease=30)
    q.send_many([Envelope(f"{key}-{n}", ordering_key=key) for n in range(3)
                 for key in ("a", "b")] + [Envelope(f"free-{n}") for n in range(6)])
    seen: list[str] = []
    for round_ in range(3):
        got = q.receive(max_messages=20)
        assert sorted(m.body for m in got if "-" in m.body and m.body[0] in "ab") == [
            f"a-{round_}", f"b-{round_}"]
        keyed = [m for m in got if m.body[0] in "ab"]
        free = [m for m in got if m.body.startswith("free")]
        if round_ == 0:  # one at a time, keyed and key-less in turns
            for m in [keyed[0], *free[:1], keyed[1], *free[1:]]:
                assert q.ack_many([m]) == [False]
            with pytest.raises(hailq.LeaseLost):
                keyed[0].ack()  # acked already: its receipt is stale
        else:  # a keyed batch, then a mixed one with a stale receipt in it
            assert q.ack_many(keyed[:1]) == [False]
            assert q.ack_many([*keyed[1:], *free, keyed[0]]) == [False] * (
                len(keyed[1:]) + len(free)) + [None]
        seen += [m.body for m in got]
    assert sorted(seen) == sorted([f"{k}-{n}" for k in "ab" for n in range(3)]
                                  + [f"free-{n}" for n in range(6)])
    assert q.stats().ready == q.stats().blocked == q.stats().in_flight == 0


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
    advance(broker, 0.3)

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


def test_rule_17_concurrent_consumers_never_lease_two_of_one_key_and_keep_its_order(
        broker: hailq.Broker, url: str) -> None:
    """Six consumers (threads, each with its own connection) race over 4 keys x 25
    messages plus 20 without a key, 3 per receive.

    A key is marked held from the moment a receive returns its message until just
    before that message is acked, and each holder keeps it a few milliseconds: a
    second lease of a held key, in the same claim or another consumer's, is caught.
    Each key's messages arrive in send order, every message exactly once, and
    different keys were held at the same time (the keys did flow in parallel).
    """
    keys = ["acct-1", "acct-2", "acct-3", "acct-4"]
    q = broker.queue("claims", lease=60)
    q.send_many([Envelope({"key": key, "n": n}, ordering_key=key)
                 for n in range(25) for key in keys]
                + [Envelope({"key": None, "n": n}) for n in range(20)])
    total = 4 * 25 + 20
    lock = threading.Lock()
    held: set[str] = set()
    most_held = [0]
    order: dict[str | None, list[int]] = {key: [] for key in [*keys, None]}
    problems: list[str] = []

    def consume() -> None:
        try:
            with hailq.connect(url) as own:
                mine = own.get_queue("claims")
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    with lock:
                        if sum(map(len, order.values())) == total:
                            return
                    batch = mine.receive(max_messages=3, wait=0.1)
                    with lock:
                        for m in batch:
                            key = m.ordering_key
                            order[key].append(m.body["n"])
                            if key is None:
                                continue
                            if key in held:
                                problems.append(f"two leases of {key} at once ({m.body})")
                            held.add(key)
                        most_held[0] = max(most_held[0], len(held))
                    for m in batch:
                        time.sleep(0.003)  # the handler's work
                        with lock:
                            held.discard(m.ordering_key or "")
                        m.ack()
        except Exception as exc:  # reported by the test below
            problems.append(f"{type(exc).__name__}: {exc}")

    consumers = [threading.Thread(target=consume) for _ in range(6)]
    for t in consumers:
        t.start()
    for t in consumers:
        t.join(90)

    assert problems == []
    for key in keys:
        assert order[key] == list(range(25)), f"{key} out of send order"
    assert sorted(order[None]) == list(range(20))
    assert most_held[0] >= 2, "the keys never flowed in parallel"
    stats = q.stats()
    assert (stats.acked, stats.redelivered, stats.backlog, stats.in_flight) == (total, 0, 0, 0)


# -- rule 18: several queues -------------------------------------------------------------------


def run_worker(broker: hailq.Broker, handlers: Mapping[str, Callable[[hailq.Message], Any]],
               expected: int, handled: list[Any], **order: Any) -> None:
    """Run a real one-slot ``hailq.Worker`` until ``handled`` holds ``expected`` entries."""
    worker = hailq.Worker(broker, handlers, concurrency=1, grace=5, poll=0.2, **order)
    thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False})
    thread.start()
    try:
        assert wait_until(lambda: len(handled) >= expected, timeout=30), (
            f"the worker handled {len(handled)} of {expected}: {handled}")
    finally:
        worker.stop()
        thread.join(30)
    assert not thread.is_alive()
    time.sleep(0.1)  # about time: nothing more is handled after the stop
    assert len(handled) == expected, f"more than expected: {handled}"


def test_rule_18_strict_order_drains_the_first_queue_before_the_next(
        broker: hailq.Broker) -> None:
    """``queues=[high, low], order="strict"``: every high message before any low one, and a
    high message that arrives while low is being drained is the very next one taken."""
    high = broker.queue("claims.high")
    low = broker.queue("claims.low")
    low.send_many([f"low {n}" for n in range(4)])
    high.send_many([f"high {n}" for n in range(4)])
    handled: list[str] = []

    def handle(m: hailq.Message) -> None:
        handled.append(m.body)
        if m.body == "low 0":
            high.send("high late")

    run_worker(broker, {"claims.low": handle, "claims.high": handle}, 9, handled,
               queues=["claims.high", "claims.low"], order="strict")

    assert handled == ["high 0", "high 1", "high 2", "high 3",
                       "low 0", "high late", "low 1", "low 2", "low 3"]
    assert wait_until(lambda: (high.stats().acked, low.stats().acked) == (5, 4))


def test_rule_18_round_robin_by_default_gives_every_queue_with_work_its_turn(
        broker: hailq.Broker) -> None:
    """``queues=[claims, email, sms]`` and no order: with a backlog in claims, each of the
    other two is served every third pick, not once claims is empty; a queue that runs
    dry gives its turns to the others, and one that gets work again is served at its
    next turn."""
    claims = broker.queue("claims")
    email = broker.queue("notify.email")
    sms = broker.queue("notify.sms")
    claims.send_many([f"claims {n}" for n in range(12)])
    email.send_many([f"email {n}" for n in range(3)])
    sms.send_many([f"sms {n}" for n in range(3)])
    handled: list[str] = []

    def handle(m: hailq.Message) -> None:
        handled.append(m.body)
        if m.body == "claims 5":
            email.send("email late")

    run_worker(broker, {"claims": handle, "notify.email": handle, "notify.sms": handle},
               19, handled, queues=["claims", "notify.email", "notify.sms"])

    assert handled[:9] == ["claims 0", "email 0", "sms 0", "claims 1", "email 1", "sms 1",
                           "claims 2", "email 2", "sms 2"], handled
    # email and sms are empty: claims takes their turns until "email late" arrives.
    late = handled.index("email late")
    assert handled[9:late] == [f"claims {n}" for n in range(3, 3 + late - 9)], handled
    assert late <= handled.index("claims 5") + 3, f"email late waited too long: {handled}"
    assert [b for b in handled if b.startswith("claims")] == [f"claims {n}" for n in range(12)]
    assert wait_until(lambda: claims.stats().acked == 12)


def test_rule_18_weights_share_the_worker_and_bound_each_queues_wait(
        broker: hailq.Broker) -> None:
    """``weights={high: 3, low: 1}`` with both queues full: every run of 4 picks holds
    3 high and 1 low, so low never waits more than 4 picks (its weight's bound) and
    high never more than 2; once high is empty, low takes every pick."""
    high = broker.queue("claims.high")
    low = broker.queue("claims.low")
    high.send_many([f"high {n}" for n in range(24)])
    low.send_many([f"low {n}" for n in range(16)])
    handled: list[str] = []

    def handle(m: hailq.Message) -> None:
        handled.append(m.queue)

    run_worker(broker, {"claims.high": handle, "claims.low": handle}, 40, handled,
               weights={"claims.high": 3, "claims.low": 1})

    both_full = handled[:32]  # 24 high take 32 picks at 3 of every 4
    for start in range(0, 32, 4):
        run = both_full[start:start + 4]
        assert sorted(run) == ["claims.high"] * 3 + ["claims.low"], (
            f"picks {start}-{start + 3} were {run}: {handled}")
    for start in range(0, 29):
        assert "claims.low" in both_full[start:start + 4], f"low waited too long: {handled}"
    for start in range(0, 31):
        assert "claims.high" in both_full[start:start + 2], f"high waited too long: {handled}"
    assert handled[32:] == ["claims.low"] * 8
    assert wait_until(lambda: (high.stats().acked, low.stats().acked) == (24, 16))


