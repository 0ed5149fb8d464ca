"""A call whose connection broke after the server did the work is never re-run blindly.

The relay in ``pgproxy`` lets the server run (and commit) a statement, then
breaks the connection before the answer arrives. The backend retries on a
fresh connection; the retry must find out what the first try did: a send is
stored once, and an ack that went through is reported as acked, not as a
lost lease.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import hailq
from waiting import wait_past

from .pgproxy import ReplyLosingProxy


@pytest.fixture
def relay(pg_url: str) -> Iterator[ReplyLosingProxy]:
    proxy = ReplyLosingProxy(pg_url)
    yield proxy
    proxy.close()


@pytest.fixture
def relayed(relay: ReplyLosingProxy, pg_url: str) -> Iterator[hailq.Broker]:
    hailq.connect(pg_url).close()  # the schema, made without the relay
    broker = hailq.connect(relay.url)
    yield broker
    broker.close()


@pytest.mark.parametrize("options", [{}, {"dedup_id": "claim-1"}, {"ordering_key": "k"}],
                         ids=["plain", "dedup", "keyed"])
def test_a_send_whose_answer_was_lost_is_stored_once(
        relayed: hailq.Broker, relay: ReplyLosingProxy, options: dict[str, str]) -> None:
    q = relayed.queue("claims")
    q.send({"warm": True})  # a pooled connection exists, so the loss hits the send itself
    [warm] = q.receive()
    warm.ack()
    # A send in a transaction (dedup id, key) loses the answer to its COMMIT.
    relay.lose_next_reply(after=b"COMMIT" if options else None)
    sent = q.send({"claim": 1}, **options)  # type: ignore[arg-type]
    assert relay.lost == 1
    got = q.receive(max_messages=10)
    assert [m.id for m in got] == [sent]
    stats = q.stats()
    assert stats.sent == 2 and stats.ready == 0 and stats.in_flight == 1


def test_a_batch_whose_answer_was_lost_is_stored_once(
        relayed: hailq.Broker, relay: ReplyLosingProxy) -> None:
    """A batch's first try inserts without ON CONFLICT; its re-run skips what it stored."""
    q = relayed.queue("claims")
    q.send({"warm": True})
    [warm] = q.receive()
    warm.ack()
    relay.lose_next_reply()
    sent = q.send_many([{"claim": 1}, {"claim": 2}, {"claim": 3}])
    assert relay.lost == 1
    got = q.receive(max_messages=10)
    assert sorted(m.id for m in got) == sorted(sent)
    stats = q.stats()
    assert stats.sent == 4 and stats.ready == 0 and stats.in_flight == 3


def test_an_ack_whose_answer_was_lost_reports_acked(
        relayed: hailq.Broker, relay: ReplyLosingProxy) -> None:
    q = relayed.queue("claims")
    q.send_many([{"n": 1}, {"n": 2}])
    first, second = q.receive(max_messages=2)
    relay.lose_next_reply()
    first.ack()  # no LeaseLost: the first try's delete went through
    assert relay.lost == 1
    relay.lose_next_reply()
    assert q.ack_many([second.receipt]) == [False]
    stats = q.stats()
    assert (stats.ready, stats.in_flight, stats.acked) == (0, 0, 2)


def test_a_lost_lease_is_still_reported_after_a_re_run(
        relayed: hailq.Broker, relay: ReplyLosingProxy) -> None:
    q = relayed.queue("claims", lease=0.2)
    q.send({"n": 1})
    [old] = q.receive()
    wait_past(relayed.now, old.lease_until)
    [new] = q.receive()
    relay.lose_next_reply()
    assert q.ack_many([old.receipt]) == [None]  # the message is there, under another lease
    new.ack()
