"""SPEC rules 6-12: receiving, leases, acks, nacks, one clock, at-least-once."""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

import hailq
from hailq import LeaseLost

from .helpers import (
    RawDatabase,
    ack_late,
    advance,
    compete,
    consume_on_a_skewed_host,
    receive_and_die,
)

# -- rule 6: receive ------------------------------------------------------------------------


def test_rule_06_receive_leases_up_to_max_messages_each_with_attempt_one(
        broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    q.send_many(range(5))

    first = q.receive(max_messages=3)
    second = q.receive(max_messages=3)

    assert [m.body for m in first] == [0, 1, 2]
    assert [m.body for m in second] == [3, 4]
    assert q.receive(max_messages=3) == []
    assert {m.attempt for m in first + second} == {1}
    assert len({m.receipt for m in first + second}) == 5
    assert q.stats().in_flight == 5


def test_rule_06_long_poll_returns_as_soon_as_a_message_arrives(broker: hailq.Broker,
                                                                url: str) -> None:
    q = broker.queue("claims")

    def send_later() -> None:
        time.sleep(0.3)  # about time: the receive must be waiting before the send comes
        with hailq.connect(url) as producer:
            producer.queue("claims").send("arrived")

    producer = threading.Thread(target=send_later)
    started = time.monotonic()
    producer.start()
    received = q.receive(wait=20)
    waited = time.monotonic() - started
    producer.join()

    assert [m.body for m in received] == ["arrived"]
    assert 0.25 <= waited < 20


def test_rule_06_long_poll_returns_when_a_delayed_message_becomes_due(
        broker: hailq.Broker, url: str, raw: RawDatabase) -> None:
    """Nothing is sent during the wait: time alone makes the message receivable.

    The receive must return soon after the delay ends, far from the end of its wait.
    On PostgreSQL the consumer's fallback poll is set longer than the wait, so only
    the wait's own look at the next due time can wake it.
    """
    consumer_url = url if raw.is_sqlite else f"{url}&poll_interval=60"
    with hailq.connect(consumer_url) as consumer:
        consumer.queue("claims")
        sent = broker.get_queue("claims").send("due soon", delay=0.5)
        started = time.monotonic()
        received = consumer.get_queue("claims").receive(wait=20)
        waited = time.monotonic() - started

    assert [m.id for m in received] == [sent]
    assert 0.4 <= waited < 10, f"returned after {waited:.2f} s of a 20 s wait"


def test_rule_06_long_poll_on_an_empty_queue_returns_empty_after_wait(
        broker: hailq.Broker) -> None:
    q = broker.queue("claims")

    started = time.monotonic()
    received = q.receive(wait=0.3)

    assert received == []
    assert time.monotonic() - started >= 0.29


def test_rule_06_each_receive_adds_one_to_attempt(broker: hailq.Broker) -> None:
    q = broker.queue("claims", max_attempts=10)
    q.send("again and again")

    attempts = []
    for _ in range(4):
        (m,) = q.receive()
        attempts.append(m.attempt)
        m.nack(delay=0)

    assert attempts == [1, 2, 3, 4]


# -- rule 7: no message has two valid leases -----------------------------------------------


def test_rule_07_four_processes_compete_for_2000_messages_without_sharing_a_lease(
        broker: hailq.Broker, url: str, tmp_path: Path) -> None:
    """Four consumer processes start together (a barrier) and drain 2,000 messages.

    Every message is received exactly once, on attempt 1, and acked while its lease
    was still valid (``ack_many`` says not late); and every process got a share of
    the work, so the consumers really competed instead of one taking everything.
    """
    q = broker.queue("claims", lease=300)
    sent = set(q.send_many(range(1000)) + q.send_many(range(1000, 2000)))
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Barrier(5)
    logs = [tmp_path / f"consumer-{i}.json" for i in range(4)]
    consumers = [ctx.Process(target=compete, args=(url, "claims", ready, str(log)))
                 for log in logs]

    for p in consumers:
        p.start()
    ready.wait(60)
    for p in consumers:
        p.join(120)
    assert [p.exitcode for p in consumers] == [0, 0, 0, 0]

    per_process = [json.loads(log.read_text()) for log in logs]
    leases = [entry for log in per_process for entry in log]
    times_received = Counter(entry["id"] for entry in leases)
    assert set(times_received) == sent
    assert max(times_received.values()) == 1, "a message was leased twice"
    assert len(leases) == 2000
    assert {entry["attempt"] for entry in leases} == {1}
    assert {entry["late"] for entry in leases} == {False}, "an ack came after its lease"
    assert sorted(entry["body"] for entry in leases) == list(range(2000))
    assert all(len(log) > 0 for log in per_process), (
        f"a consumer got no work: {[len(log) for log in per_process]} messages per process")
    stats = q.stats()
    assert (stats.acked, stats.ready, stats.in_flight, stats.redelivered, stats.late_acks) \
        == (2000, 0, 0, 0, 0)


def test_rule_07_threads_of_one_process_never_share_a_lease(broker: hailq.Broker) -> None:
    q = broker.queue("claims", lease=300)
    q.send_many(range(400))
    seen: list[list[str]] = [[] for _ in range(8)]
    errors: list[BaseException] = []

    def consume(slot: int) -> None:
        try:
            while messages := q.receive(max_messages=5):
                for m in messages:
                    seen[slot].append(m.id)
                    m.ack()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)

    assert errors == []
    every = [i for ids in seen for i in ids]
    assert len(every) == len(set(every)) == 400
    assert q.stats().acked == 400


# -- rule 8: redelivery --------------------------------------------------------------------


def test_rule_08_message_whose_lease_ends_is_delivered_again(broker: hailq.Broker) -> None:
    q = broker.queue("claims", lease=0.3)
    sent = q.send("crash victim")
    (first,) = q.receive()
    assert q.receive() == []  # still leased

    advance(broker, 0.4)
    (second,) = q.receive()

    assert second.id == first.id == sent
    assert second.attempt == first.attempt + 1 == 2
    assert second.receipt != first.receipt
    assert q.stats().redelivered == 1


def test_rule_08_receive_with_its_own_lease_overrides_the_queue_lease(
        broker: hailq.Broker) -> None:
    q = broker.queue("claims", lease=300)
    q.send("short")
    q.receive(lease=0.2)

    advance(broker, 0.3)

    assert [m.attempt for m in q.receive()] == [2]


# -- rule 9: ack -----------------------------------------------------------------------------


def test_rule_09_ack_removes_the_message_for_good(broker: hailq.Broker) -> None:
    q = broker.queue("claims", lease=0.2)
    q.send("done")
    (m,) = q.receive()

    m.ack()
    advance(broker, 0.3)

    assert q.receive() == []
    assert q.peek() == []
    stats = q.stats()
    assert (stats.acked, stats.late_acks, stats.in_flight, stats.ready) == (1, 0, 0, 0)
    with pytest.raises(LeaseLost):
        m.ack()


def test_rule_09_late_ack_succeeds_and_is_counted(broker: hailq.Broker) -> None:
    q = broker.queue("claims", lease=0.2)
    q.send("slow handler")
    (m,) = q.receive()

    advance(broker, 0.3)
    m.ack()

    stats = q.stats()
    assert (stats.acked, stats.late_acks) == (1, 1)
    assert q.receive() == []


def test_rule_09_late_ack_succeeds_when_others_received_other_messages(
        broker: hailq.Broker) -> None:
    q = broker.queue("claims", lease=0.2)
    q.send("slow handler", priority=0)
    (m,) = q.receive()
    advance(broker, 0.3)
    q.send("urgent", priority=9)

    (other,) = q.receive()  # a receive after the lease ended, of another message
    assert other.body == "urgent"
    m.ack()

    assert q.stats().late_acks == 1
    other.ack()
    assert q.receive() == []
    assert q.stats().acked == 2


def test_rule_09_late_ack_in_a_consumer_process_is_counted(broker: hailq.Broker,
                                                          url: str) -> None:
    q = broker.queue("claims")
    q.send("slow handler")
    consumer = multiprocessing.get_context("spawn").Process(target=ack_late,
                                                            args=(url, "claims"))

    consumer.start()
    consumer.join(60)

    assert consumer.exitcode == 0
    assert q.receive() == []
    stats = q.stats()
    assert (stats.acked, stats.late_acks) == (1, 1)


def test_rule_09_stale_receipt_raises_lease_lost_and_changes_nothing(
        broker: hailq.Broker) -> None:
    q = broker.queue("claims", lease=0.2)
    q.send("contested")
    (stale,) = q.receive()
    advance(broker, 0.3)
    (current,) = q.receive(lease=30)

    with pytest.raises(LeaseLost):
        stale.ack()
    assert q.ack_many([stale.receipt]) == [None]

    stats = q.stats()
    assert (stats.acked, stats.late_acks, stats.in_flight) == (0, 0, 1)
    assert q.receive() == []  # the current lease is untouched
    current.ack()
    assert q.stats().acked == 1


def test_rule_09_each_receipt_of_a_batch_names_its_own_message_alone(
        broker: hailq.Broker) -> None:
    """One receive of several messages is one lease per message: a receipt acks its own
    message only, and one stitched from two receipts of the batch acks nothing."""
    q = broker.queue("claims")
    q.send_many(["photo check", "fraud check", "payout"])
    first, second, third = q.receive(3)
    receipts = [first.receipt, second.receipt, third.receipt]
    assert len(set(receipts)) == 3
    first_id, first_token, _ = first.receipt.split(".")[:3]
    _, _, second_seq = second.receipt.split(".")[:3]

    stitched = f"{first_id}.{first_token}.{second_seq}"
    assert q.ack_many([stitched]) == [None]
    with pytest.raises(LeaseLost):
        q.ack(stitched)
    assert q.stats().in_flight == 3

    q.ack(second.receipt)

    assert q.stats().in_flight == 2
    assert q.ack_many([first, third]) == [False, False]
    assert (q.stats().acked, q.stats().in_flight) == (3, 0)


def test_rule_09_a_new_receive_of_a_batch_fences_every_old_receipt(
        broker: hailq.Broker) -> None:
    q = broker.queue("claims", lease=0.2)
    q.send_many(["a", "b"])
    old = q.receive(2)
    advance(broker, 0.3)
    new = q.receive(2)
    assert sorted(m.id for m in new) == sorted(m.id for m in old)

    assert q.ack_many(old) == [None, None]

    assert q.ack_many(new) == [False, False]
    assert q.stats().acked == 2


def test_rule_09_a_stale_receipt_beside_a_current_one_of_the_same_claim_acks_nothing(
        broker: hailq.Broker) -> None:
    """Two messages received again together: a batch ack holding the first one's stale
    receipt and the second one's current receipt acks the second alone."""
    q = broker.queue("claims", lease=0.2)
    q.send_many(["a", "b"])
    old_a, old_b = q.receive(2)
    advance(broker, 0.3)
    new_a, new_b = q.receive(2)
    assert (new_a.id, new_b.id) == (old_a.id, old_b.id)

    assert q.ack_many([old_a.receipt, new_b.receipt]) == [None, False]
    results, more = q.ack_and_receive([old_b, new_a])

    assert results == [None, False]
    assert more == []
    assert (q.stats().acked, q.stats().in_flight) == (2, 0)


def test_rule_09_ack_many_reports_each_receipt(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    q.send_many(["lost", "late", "in time"])
    (lost,) = q.receive(lease=0.2)
    (late,) = q.receive(lease=0.2)
    (in_time,) = q.receive(lease=30)
    advance(broker, 0.3)
    (lost_again,) = q.receive(lease=30)
    assert lost_again.id == lost.id

    results = q.ack_many([in_time, late, lost])

    assert results == [False, True, None]
    stats = q.stats()
    assert (stats.acked, stats.late_acks, stats.in_flight) == (2, 1, 1)


@pytest.mark.parametrize("path", ["ack_many", "ack_and_receive"])
def test_rule_09_acks_of_one_claim_report_each_message(broker: hailq.Broker,
                                                        path: str) -> None:
    q = broker.queue("claims")
    q.send_many(["in time", "lost", "late", "extended", "next"])
    batch = q.receive(max_messages=4, lease=0.3)
    in_time, lost, _late, extended = batch
    in_time.extend(30)
    extended.extend(30)
    advance(broker, 0.4)
    (lost_again,) = q.receive(lease=30)
    assert lost_again.id == lost.id

    if path == "ack_many":
        results = q.ack_many(batch)
    else:
        results, more = q.ack_and_receive(batch)
        assert [m.body for m in more] == ["next"]

    assert results == [False, None, True, False]
    stats = q.stats()
    assert (stats.acked, stats.late_acks) == (3, 1)
    assert q.ack_many([lost_again]) == [False]
    stats = q.stats()
    assert (stats.ready, stats.in_flight) == ((0, 1) if path == "ack_and_receive" else (1, 0))


# -- rule 10: nack and extend --------------------------------------------------------------


def test_rule_10_nack_without_delay_uses_the_retry_backoff(broker: hailq.Broker) -> None:
    q = broker.queue("claims", retry={"base": 0.4, "factor": 2, "jitter": 0})
    q.send("flaky")
    (m,) = q.receive()

    m.nack(error="OCR service timed out")

    assert q.receive() == []
    assert q.stats().delayed == 1
    (again,) = q.receive(wait=5)
    assert again.attempt == 2
    assert again.id == m.id


@pytest.mark.parametrize("how", ["ack_many", "ack_and_receive", "receipts"])
def test_rule_09_a_stale_receipt_beside_the_current_one_is_lost(broker: hailq.Broker,
                                                                how: str) -> None:
    """The same message twice in one batch: its old lease (ended, received again since)
    and its current one. Only the current one acks; the stale one reports lost."""
    q = broker.queue("claims", lease=0.3)
    q.send("slow")
    (old,) = q.receive()
    advance(broker, 0.5)
    (new,) = q.receive()
    assert (new.id, new.attempt) == (old.id, 2)

    if how == "ack_many":
        results = q.ack_many([old, new])
    elif how == "ack_and_receive":
        results, got = q.ack_and_receive([old, new], 5)
        assert got == []
    else:
        results = q.ack_many([old.receipt, new.receipt])

    assert results == [None, False]
    assert not old.settled
    stats = q.stats()
    assert (stats.acked, stats.in_flight, stats.late_acks) == (1, 0, 0)


@pytest.mark.parametrize("how", ["message", "receipt"])
def test_rule_10_the_retry_backoff_grows_with_the_attempt(broker: hailq.Broker,
                                                          how: str) -> None:
    """The third failure waits base * factor**2, nacked through the Message or through
    its bare receipt string (a consumer that kept only the receipt)."""
    q = broker.queue("claims", max_attempts=10,
                     retry={"base": 100, "factor": 2, "max": 10_000, "jitter": 0})
    q.send("flaky")
    for _ in range(2):
        (m,) = q.receive()
        m.nack(delay=0)
    (m,) = q.receive()
    assert m.attempt == 3

    before = time.time()
    if how == "message":
        m.nack()
    else:
        q.nack(m.receipt)

    (held,) = q.peek()
    assert 400 - 5 <= held.available_at - before <= 400 + 5
    with pytest.raises(LeaseLost):  # the lease ended with the nack: nothing changes
        q.nack(m.receipt)
    assert q.peek()[0].available_at == held.available_at


def test_rule_10_nack_with_delay_zero_gives_back_now(broker: hailq.Broker) -> None:
    q = broker.queue("claims", retry={"base": 300})
    q.send("flaky")
    (m,) = q.receive()

    m.nack(delay=0)

    assert [(x.id, x.attempt) for x in q.receive()] == [(m.id, 2)]
    assert q.stats().nacked == 1


def test_rule_10_nack_with_delay_holds_the_message_back(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    q.send("flaky")
    (m,) = q.receive()

    m.nack(delay=0.4)

    assert q.receive() == []
    advance(broker, 0.5)
    assert [x.id for x in q.receive()] == [m.id]


def test_rule_10_nack_error_is_kept_with_the_message(broker: hailq.Broker) -> None:
    q = broker.queue("claims", max_attempts=2)
    q.send("bad scan")
    q.receive()[0].nack(delay=0, error="page 2 unreadable")
    q.receive()[0].nack(delay=0, error="page 3 unreadable")

    (dead,) = q.dead_letters()

    assert [e.error for e in dead.errors] == ["page 2 unreadable", "page 3 unreadable"]
    assert dead.last_error == "page 3 unreadable"


def test_rule_10_extend_moves_the_end_of_the_lease(broker: hailq.Broker) -> None:
    q = broker.queue("claims", lease=0.3)
    q.send("long job")
    (m,) = q.receive()
    old_end = m.lease_until

    m.extend(10)
    advance(broker, 0.4)

    assert m.lease_until > old_end + 5
    assert q.receive() == []
    m.ack()
    assert q.stats().late_acks == 0


def test_rule_10_an_ended_lease_is_extended_only_while_the_message_could_live(
        broker: hailq.Broker) -> None:
    """Nobody received it since: an ended lease can still be extended, unless it was the
    last attempt. That message is dead (rule 13), whether or not anyone has looked yet."""
    q = broker.queue("claims", lease=0.2, max_attempts=2)
    q.send("slow")
    (first,) = q.receive()
    advance(broker, 0.3)
    first.extend(30)  # attempt 1 of 2 ended unseen: the lease is taken up again
    assert q.stats().in_flight == 1
    first.nack(delay=0)
    (last,) = q.receive(lease=0.2)
    advance(broker, 0.3)
    with pytest.raises(LeaseLost):
        last.extend(30)  # no stats() or receive() in between: the same answer as after one
    stats = q.stats()
    assert (stats.dead, stats.in_flight) == (1, 0)
    with pytest.raises(LeaseLost):
        last.extend(30)



@pytest.mark.parametrize("look_first", [False, True], ids=["unseen", "after-stats"])
def test_rule_13_a_give_back_never_revives_a_last_attempt_whose_lease_ended(
        broker: hailq.Broker, look_first: bool) -> None:
    """give_back returns a held lease untried, even on the last attempt; once that lease
    has ended the message is dead (rule 13), marked yet or not: the same answer."""
    q = broker.queue("claims", lease=0.2, max_attempts=1)
    q.send_many(["held", "ended"])
    (held,) = q.receive(lease=30)
    held.give_back()  # still held: back in line, not dead
    assert (q.stats().ready, q.stats().dead) == (2, 0)
    (again,) = q.receive(lease=30)
    assert again.body == "held"
    again.ack()
    (ended,) = q.receive()
    advance(broker, 0.3)
    if look_first:
        q.stats()
    with pytest.raises(LeaseLost):
        ended.give_back()
    stats = q.stats()
    assert (stats.dead, stats.ready, stats.in_flight) == (1, 0, 0)
    assert [d.body for d in q.dead_letters()] == ["ended"]

def test_rule_10_nack_extend_and_dead_letter_raise_lease_lost_for_a_stale_receipt(
        broker: hailq.Broker) -> None:
    q = broker.queue("claims", lease=0.2)
    q.send("contested")
    (stale,) = q.receive()
    advance(broker, 0.3)
    (current,) = q.receive(lease=30)

    with pytest.raises(LeaseLost):
        stale.nack(delay=0)
    with pytest.raises(LeaseLost):
        stale.extend(60)
    with pytest.raises(LeaseLost):
        stale.dead_letter("too late")

    stats = q.stats()
    assert (stats.nacked, stats.dead, stats.in_flight) == (0, 0, 1)
    assert q.receive() == []
    current.ack()
    assert q.stats().acked == 1


def test_rule_10_nack_after_ack_raises_lease_lost(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    q.send("done")
    (m,) = q.receive()
    m.ack()

    with pytest.raises(LeaseLost):
        m.nack(delay=0)
    with pytest.raises(LeaseLost):
        m.extend(5)
    assert q.receive() == []


# -- rule 11: one clock --------------------------------------------------------------------


def test_rule_11_lease_deadline_is_on_the_database_clock(broker: hailq.Broker,
                                                         raw: RawDatabase) -> None:
    q = broker.queue("claims", lease=30)
    q.send("x")

    before = raw.now()
    (m,) = q.receive()
    after = raw.now()

    assert before + 30 - 1 <= m.lease_until <= after + 30 + 1


def test_rule_11_consumers_with_skewed_clocks_agree_on_leases(
        broker: hailq.Broker, url: str, raw: RawDatabase, tmp_path: Path) -> None:
    """PostgreSQL: the database's clock rules, whatever the consumers' hosts think.

    Two consumer processes run with ``time.time`` an hour ahead and an hour behind
    (hailq imported afresh after the skew, so not even an import-time copy of the
    clock is real). Each finds one lease still valid on the database clock and one
    that has ended there, and must take exactly the ended one: the host ahead would
    think both ended long ago, the host behind that both run for another hour. The
    new deadline is database time + lease, not host time; what they send is
    receivable at once, stamped with database time; the valid lease still acks in time.

    SQLite: there is no database clock and no second host. An embedded database
    lives on one machine, so its consumers share that machine's clock; hailq's one
    clock is then the host's, which ``connect(clock=...)`` replaces. Two consumers
    given clocks an hour apart would disagree, but the rule's skewed hosts cannot
    arise on SQLite. What the test asserts instead: every lease decision follows the one
    clock and nothing else. With that clock an hour ahead of real time and moved on
    by hand, the deadline is clock + lease, a second consumer cannot take the lease
    until the clock passes the deadline (no real time passes), then it can, and the
    first receipt is stale. A lease set or ended on the real clock would fail this.
    """
    if raw.is_sqlite:
        _one_clock_decides_every_lease_on_sqlite(url)
    else:
        _hosts_with_skewed_clocks_agree_on_postgres(broker, url, raw, tmp_path)


def _one_clock_decides_every_lease_on_sqlite(url: str) -> None:
    skew = [3600.0]

    def clock() -> float:
        return time.time() + skew[0]

    with hailq.connect(url, clock=clock) as first, hailq.connect(url, clock=clock) as second:
        q = first.queue("claims", lease=30)
        q.send("x")
        (held,) = q.receive()
        assert clock() + 29 <= held.lease_until <= clock() + 31
        other = second.get_queue("claims")

        assert other.receive(max_messages=10) == []
        skew[0] += 25  # 25 s later on the one clock: the lease still holds
        assert other.receive(max_messages=10) == [], "a lease ended before its deadline"
        skew[0] += 10  # 35 s later: it has ended
        taken = other.receive(max_messages=10)
        assert [(m.id, m.attempt) for m in taken] == [(held.id, 2)], (
            "the lease did not end when the one clock passed its deadline")
        (again,) = taken
        assert clock() + 29 <= again.lease_until <= clock() + 31
        with pytest.raises(LeaseLost):
            held.ack()
        again.ack()
        assert q.stats().acked == 1


def _hosts_with_skewed_clocks_agree_on_postgres(broker: hailq.Broker, url: str,
                                               raw: RawDatabase, tmp_path: Path) -> None:
    hour = 3600.0
    held, ended, ends_at = {}, {}, 0.0
    for name in ("ahead", "behind"):
        q = broker.queue(name, lease=30)
        q.send("held")
        (held[name],) = q.receive()  # valid for 30 s on the database clock
        q.send("ended")
        (ended[name],) = q.receive(lease=0.3)
        ends_at = max(ends_at, ended[name].lease_until)
    ctx = multiprocessing.get_context("spawn")
    outs = {name: tmp_path / f"{name}.json" for name in held}
    hosts = [ctx.Process(target=consume_on_a_skewed_host,
                         args=(url, name, skew, ends_at + 0.05, str(outs[name])))
             for name, skew in (("ahead", hour), ("behind", -hour))]
    for p in hosts:
        p.start()
    for p in hosts:
        p.join(60)
    assert [p.exitcode for p in hosts] == [0, 0]
    after = raw.now()

    for name, skew in (("ahead", hour), ("behind", -hour)):
        seen = json.loads(outs[name].read_text())
        assert seen["host_now"] - seen["db_now"] == pytest.approx(skew, abs=60)
        got = seen["received"]
        assert [(m["body"], m["attempt"]) for m in got] == [("ended", 2)], (
            f"the host {skew:+g} s off took {got}: only the ended lease was free")
        assert after - 60 < got[0]["lease_until"] - 30 <= after, "a deadline on the host clock"
        q = broker.get_queue(name)
        with pytest.raises(LeaseLost):
            ended[name].ack()
        assert q.ack_many([held[name]]) == [False], "the held lease did not hold"
        (sent,) = q.receive(max_messages=10)
        assert sent.body == f"sent by a host {skew:+g} s off"
        assert abs(sent.enqueued_at - after) < 60
        assert q.ack_many([got[0]["receipt"], sent]) == [False, False]
        assert q.stats().late_acks == 0


# -- rule 12: at-least-once ----------------------------------------------------------------


def test_rule_12_a_consumer_that_dies_loses_nothing(broker: hailq.Broker, url: str) -> None:
    q = broker.queue("claims", lease=0.3)
    sent = q.send("survives a crash")
    crash = multiprocessing.get_context("spawn").Process(target=receive_and_die,
                                                         args=(url, "claims"))

    crash.start()
    crash.join(60)
    assert crash.exitcode == 0  # it did take the message before dying
    assert q.receive() == []
    advance(broker, 0.35)

    (m,) = q.receive(wait=5)
    assert (m.id, m.attempt) == (sent, 2)


def test_rule_09_ack_and_receive_settles_finished_work_with_the_next_claim(
        broker: hailq.Broker) -> None:
    claims = broker.queue("claims", lease=300)
    photos = broker.queue("photos", lease=300)
    claims.send_many([{"claim": n} for n in range(6)])
    photos.send({"photo": 1}, ordering_key="contract-7")
    photos.send({"photo": 2}, ordering_key="contract-7")
    first = claims.receive(max_messages=2)
    [photo] = photos.receive()
    stale = claims.receive(max_messages=1)[0]
    message_id, token, seq = stale.receipt.split(".")[:3]
    other = "0" * 16 if token != "0" * 16 else "1" * 16
    stale_copy = hailq.Message(claims, id=stale.id, body=stale.body, headers={},
                               priority=0, ordering_key=None, attempt=1,
                               enqueued_at=stale.enqueued_at, lease_until=0,
                               receipt=f"{message_id}.{other}.{seq}")

    results, more = claims.ack_and_receive([*first, photo, stale_copy], max_messages=2)

    assert results == [False, False, False, None]  # the forged receipt acks nothing
    assert [m.body["claim"] for m in more] == [3, 4]
    assert all(m.settled for m in [*first, photo]) and not stale_copy.settled
    assert [m.body for m in photos.receive()] == [{"photo": 2}]  # its key was released
    stats = claims.stats()
    assert (stats.acked, stats.in_flight, stats.ready) == (2, 3, 1)
