"""Rule 40, cancel: a waiting message never starts; a running one is refused every later
ack, keeps its max_in_flight slot and its ordering key until its handler has stopped or
its lease has ended. Storage semantics through the public API, on every backend; a real
worker's handler being stopped is in tests/runtime/test_worker_cancel.py."""

from __future__ import annotations

import pytest

import hailq

from .helpers import advance


def _present(queue: hailq.Queue) -> tuple[int, int, int, int, int]:
    s = queue.stats()
    return s.ready, s.scheduled, s.in_flight, s.blocked, s.dead


def test_rule_40_a_waiting_message_never_starts_whatever_it_waits_for(
        broker: hailq.Broker) -> None:
    claims = broker.queue("claims", lease=30)
    ready = claims.send({"claim": 1})
    delayed = claims.send({"claim": 2}, delay=3600)
    head = claims.send({"claim": 3}, ordering_key="policy-7")
    behind = claims.send({"claim": 4}, ordering_key="policy-7")
    kept = claims.send({"claim": 5})
    assert [claims.cancel(i) for i in (ready, delayed, behind)] == ["waiting"] * 3
    assert broker.cancel(head) == "waiting"  # by id alone: its queue is looked up
    assert [m.id for m in claims.receive(10)] == [kept]
    for gone in (ready, delayed, head, behind):
        assert claims.get_message(gone) is None
    assert claims.stats().acked == 0  # counted as purged, never as acked


def test_rule_40_a_cancelled_head_frees_its_key_for_the_next(broker: hailq.Broker) -> None:
    claims = broker.queue("claims", lease=30, on_dead="park")
    head = claims.send({"claim": 1}, ordering_key="policy-7")
    nxt = claims.send({"claim": 2}, ordering_key="policy-7")
    claims.cancel(head)
    [message] = claims.receive()
    assert message.id == nxt
    assert claims.stats().parked_keys == []


def test_rule_40_unknown_acked_and_dead_ids_are_not_found_and_nothing_is_written(
        broker: hailq.Broker) -> None:
    claims = broker.queue("claims", lease=30, max_attempts=1)
    acked = claims.send({"claim": 1})
    claims.receive()[0].ack()
    dead = claims.send({"claim": 2})
    claims.receive()[0].dead_letter("malformed")
    waiting = claims.send({"claim": 3})
    before = _present(claims), claims.stats().acked
    never = "01ARZ3NDEKTSV4RRFFQ69G5FAV"  # well formed, never sent
    for message_id in (acked, dead, never):
        with pytest.raises(hailq.MessageNotFound):
            claims.cancel(message_id)
        with pytest.raises(hailq.NotFound):
            broker.cancel(message_id)
    assert (_present(claims), claims.stats().acked) == before
    assert [d.id for d in claims.dead_letters()] == [dead]
    assert claims.get_message(waiting) is not None
    with pytest.raises(hailq.InvalidArgument):
        claims.cancel("not an id")
    with pytest.raises(hailq.QueueNotFound):
        broker.cancel(waiting, queue="nowhere")


def test_rule_40_a_running_message_records_cancelled_and_every_later_ack_is_refused(
        broker: hailq.Broker) -> None:
    claims = broker.queue("claims", lease=30)
    sent = claims.send({"claim": 1})
    [message] = claims.receive()
    assert claims.cancel(sent) == "running"
    assert claims.cancel(sent) == "running"  # again: nothing more written
    shown = claims.get_message(sent)
    assert shown is not None and shown.state == "cancelled"
    assert [(e.attempt, e.error) for e in shown.errors] == [(1, "cancelled")]
    assert claims.stats().in_flight == 1  # its handler may still run: it holds its lease
    with pytest.raises(hailq.MessageCancelled):
        message.extend(60)
    with pytest.raises(hailq.MessageCancelled):
        message.ack()
    assert isinstance(hailq.MessageCancelled("x"), hailq.LeaseLost)
    # The refused ack said its handler had stopped: the message is let go.
    assert claims.get_message(sent) is None
    assert _present(claims) == (0, 0, 0, 0, 0)
    with pytest.raises(hailq.LeaseLost):
        claims.ack(message.receipt)
    assert claims.stats().late_acks == 0


def test_rule_40_unlike_rule_9_a_late_ack_of_a_cancelled_message_is_refused(
        broker: hailq.Broker) -> None:
    claims = broker.queue("claims", lease=1)
    plain, cancelled = claims.send({"claim": 1}), claims.send({"claim": 2})
    first, second = claims.receive(2)
    claims.cancel(cancelled)
    advance(broker, 1.5)  # both leases end; nobody receives either since
    first.ack()  # rule 9: a late ack succeeds
    with pytest.raises(hailq.LeaseLost):
        second.ack()
    assert claims.stats().late_acks == 1
    assert claims.receive() == []
    assert claims.get_message(cancelled) is None and claims.get_message(plain) is None


def test_rule_40_a_nack_of_a_cancelled_message_is_refused_too(broker: hailq.Broker) -> None:
    claims = broker.queue("claims", lease=30)
    sent = claims.send({"claim": 1})
    [message] = claims.receive()
    claims.cancel(sent)
    with pytest.raises(hailq.MessageCancelled):
        message.nack(error="downstream busy")
    assert claims.receive() == []  # never given back
    assert claims.stats().nacked == 0


def test_rule_40_it_keeps_its_max_in_flight_slot_until_its_handler_stops(
        broker: hailq.Broker) -> None:
    claims = broker.queue("claims", lease=30, max_in_flight=1)
    first = claims.send({"claim": 1})
    second = claims.send({"claim": 2})
    [running] = claims.receive()
    assert running.id == first
    claims.cancel(first)
    assert claims.receive() == []  # its handler may still run: the slot is held
    assert claims.let_cancelled_go([running]) == [first]  # the worker's word: it stopped
    [message] = claims.receive()
    assert message.id == second


def test_rule_40_it_keeps_its_slot_and_key_until_its_lease_ends(broker: hailq.Broker) -> None:
    claims = broker.queue("claims", lease=1, max_in_flight=1, on_dead="park")
    head = claims.send({"claim": 1}, ordering_key="policy-7")
    nxt = claims.send({"claim": 2}, ordering_key="policy-7")
    other = claims.send({"claim": 3})
    [running] = claims.receive()
    claims.cancel(head)
    assert claims.receive() == []
    advance(broker, 1.5)  # its handler never said it stopped; its lease ends
    got = [m.id for m in claims.receive(10)]
    assert got in ([nxt], [other])  # the cap lets one through, either is due
    assert claims.get_message(head) is None
    stats = claims.stats()
    assert (stats.dead, stats.parked_keys, stats.dead_lettered) == (0, [], 0)
    with pytest.raises(hailq.LeaseLost):
        running.ack()


def test_rule_40_cancel_leaves_the_other_messages_alone(broker: hailq.Broker) -> None:
    claims = broker.queue("claims", lease=30)
    ids = [claims.send({"claim": n}) for n in range(5)]
    leased = claims.receive(2)
    claims.cancel(ids[3])
    claims.cancel(leased[0].id)
    leased[1].ack()
    assert sorted(m.id for m in claims.receive(10)) == sorted([ids[2], ids[4]])
