"""SPEC rule 33: rate limits, summed over every consumer, enforced in the database."""

from __future__ import annotations

import threading
import time

import pytest

import hailq
from hailq import InvalidArgument
from waiting import wait_for

from .helpers import RawDatabase


def _consume(url: str, queue: str, seconds: float, starts: list[float],
             lock: threading.Lock, batch: int = 10) -> None:
    """A consumer of its own (its own broker: another connection, as another host)."""
    with hailq.connect(url) as broker:
        q = broker.get_queue(queue)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            got = q.receive(max_messages=batch, wait=min(0.5, deadline - time.monotonic()))
            with lock:
                starts.extend(time.monotonic() for _ in got)
            q.ack_many(got)


def test_rule_33_rates_are_validated_and_bad_ones_write_nothing(broker: hailq.Broker) -> None:
    for bad in ("100", "100/d", "-1/s", "0/s", "fast", 100, "1e9/s"):
        with pytest.raises(InvalidArgument, match="rate"):
            broker.queue("results", rate=bad)
    with pytest.raises(InvalidArgument, match="burst needs a rate"):
        broker.queue("results", burst=5)
    with pytest.raises(InvalidArgument, match="burst"):
        broker.queue("results", rate="5/s", burst=0)
    assert broker.queues() == []

    q = broker.queue("results", rate="100/s")
    assert (q.settings.rate, q.settings.burst, q.settings.bucket) == ("100/s", None, 100.0)
    assert broker.queue("slow", rate="10/m").settings.bucket == 1.0  # at least one
    assert broker.queue("hourly", rate="7200/h", burst=3).settings.rate_per_second == 2.0
    assert broker.queue("results", rate=None).settings.rate is None


def test_rule_33_at_most_the_rate_starts_per_second_summed_over_every_consumer(
        broker: hailq.Broker, url: str) -> None:
    q = broker.queue("results", rate="20/s", burst=5)
    q.send_many(list(range(400)))
    starts: list[float] = []
    lock = threading.Lock()
    began = time.monotonic()
    consumers = [threading.Thread(target=_consume, args=(url, "results", 2.5, starts, lock))
                 for _ in range(4)]
    for c in consumers:
        c.start()
    for c in consumers:
        c.join()
    elapsed = time.monotonic() - began
    # The burst, then 20 a second: never more, whatever the number of consumers.
    assert len(starts) <= 5 + 20 * elapsed + 1
    assert len(starts) >= 20 * 2.5 * 0.7
    # No second of it held more than the burst and a second's worth.
    for t in starts:
        assert sum(1 for s in starts if t <= s < t + 1.0) <= 5 + 20 + 1


def test_rule_33_the_rate_combines_with_max_in_flight(broker: hailq.Broker) -> None:
    q = broker.queue("results", rate="1000/s", max_in_flight=3)
    q.send_many(list(range(20)))

    held = q.receive(max_messages=10)
    assert len(held) == 3  # the cap, though tokens remain
    assert q.receive(max_messages=10) == []
    q.ack_many(held)
    assert len(q.receive(max_messages=10)) == 3

    slow = broker.queue("slow", rate="2/m", burst=2, max_in_flight=10)
    slow.send_many(list(range(20)))
    assert len(slow.receive(max_messages=10)) == 2  # the tokens, though the cap has room
    assert slow.receive(max_messages=10) == []


def test_rule_33_an_operator_change_reaches_running_consumers(
        broker: hailq.Broker, url: str) -> None:
    q = broker.queue("results", rate="1/m", burst=1)
    q.send_many(list(range(100)))
    assert len(q.receive(max_messages=10)) == 1
    assert q.receive(max_messages=10) == []

    with hailq.connect(url) as operator:
        operator.queue("results", rate="1000/s", burst=50)
    # Within its settings cache (0.5 s) the old limit gives nothing and takes nothing:
    # receive until the new one reaches this process.
    got_new = wait_for(lambda: q.receive(max_messages=10), timeout=5.0,
                       what="the new limit", step=0.05)
    assert len(got_new) == 10

    with hailq.connect(url) as operator:
        operator.queue("results", rate=None)
    time.sleep(0.6)  # about time: the settings cache runs out
    got = sum(len(q.receive(max_messages=100)) for _ in range(3))
    assert got == 89  # no limit any more


def test_rule_33_unused_tokens_stay_for_later_receives(broker: hailq.Broker) -> None:
    q = broker.queue("results", rate="1/h", burst=3)
    assert q.receive(max_messages=10) == []  # nothing to start: no token spent
    q.send_many(list(range(10)))
    assert len(q.receive(max_messages=10)) == 3


def test_rule_33_a_limited_receiver_sleeps_until_the_next_token(broker: hailq.Broker) -> None:
    q = broker.queue("results", rate="2/s", burst=1)
    q.send_many(list(range(10)))
    assert len(q.receive(max_messages=5)) == 1

    cpu, began = time.thread_time(), time.monotonic()
    got = q.receive(max_messages=5, wait=2.0)
    waited = time.monotonic() - began

    assert len(got) == 1  # the next token came after about half a second
    assert 0.2 <= waited < 1.5
    assert time.thread_time() - cpu < 0.25 * max(waited, 0.5)  # asleep, not polling

    slow = broker.queue("slow", rate="1/h", burst=1)
    slow.send_many([1, 2])
    slow.receive()
    cpu, began = time.thread_time(), time.monotonic()
    assert slow.receive(wait=1.0) == []
    assert time.monotonic() - began >= 0.9
    assert time.thread_time() - cpu < 0.2


def test_rule_33_unlimited_queues_never_touch_a_bucket(broker: hailq.Broker,
                                                      raw: RawDatabase) -> None:
    q = broker.queue("plain")
    q.send_many(list(range(50)))
    q.ack_many(q.receive(max_messages=50))
    buckets = "hailq_rate_buckets" if raw.is_sqlite else raw.table("rate_buckets")
    assert raw.count(buckets) == 0

    broker.queue("limited", rate="10/s").send(1)
    broker.get_queue("limited").receive()
    assert raw.count(buckets) == 1
