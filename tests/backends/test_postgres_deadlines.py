"""Rule 31: no call waits for ever on a server that stops answering.

The relay in ``pgstall`` stops passing bytes on while every connection stays
open, so TCP sees nothing wrong and only hailq's own deadline (the URL's
``timeout``) can end a call. Each call must fail within it with a
``StorageError`` naming the deadline; a send adds that the message may have
been stored, since its request may still reach the server; and once the relay
passes bytes again the same broker works, and a retry under the same
``dedup_id`` stores the message once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

import hailq

from .pgstall import StallingRelay

TIMEOUT = 2  # seconds: the URL's timeout option
SLACK = 1.5  # seconds past it that a failing call may take to come back


@pytest.fixture
def relay(pg_url: str) -> Iterator[StallingRelay]:
    proxy = StallingRelay(pg_url)
    yield proxy
    proxy.close()


@pytest.fixture
def stalled(relay: StallingRelay, pg_url: str) -> Iterator[hailq.Broker]:
    hailq.connect(pg_url).close()  # the schema, made without the relay
    broker = hailq.connect(f"{relay.url}&timeout={TIMEOUT}")
    yield broker
    relay.resume()
    broker.close()


def _fails_in_time(call: object) -> hailq.StorageError:
    assert callable(call)
    t0 = time.monotonic()
    with pytest.raises(hailq.StorageError) as caught:
        call()
    took = time.monotonic() - t0
    assert took < TIMEOUT + SLACK, f"{took:.2f} s"
    error = caught.value
    assert not isinstance(error, psycopg.Error)
    assert f"no answer within {TIMEOUT} s" in str(error) or "connection" in str(error), error
    return error


def test_rule_31_a_send_to_a_server_that_stopped_answering_fails_in_time_and_may_be_stored(
        stalled: hailq.Broker, relay: StallingRelay, pg_url: str) -> None:
    q = stalled.queue("claims")
    q.send({"claim": 0})  # the pool holds a working connection
    relay.stall()
    error = _fails_in_time(lambda: q.send({"claim": 1}, dedup_id="claim-1"))
    assert f"no answer within {TIMEOUT} s" in str(error)
    assert "may have been stored" in str(error) and "dedup_id" in str(error)

    relay.resume()  # the held request may reach the server now, and commit
    again = q.send({"claim": 1}, dedup_id="claim-1")
    with hailq.connect(pg_url) as direct:
        bodies = [m.body for m in direct.get_queue("claims").receive(max_messages=10)]
    assert sorted(b["claim"] for b in bodies) == [0, 1], bodies  # type: ignore[index]
    assert again


def test_rule_31_receives_acks_and_reads_fail_in_time_without_the_send_hint(
        stalled: hailq.Broker, relay: StallingRelay) -> None:
    q = stalled.queue("claims")
    q.send({"claim": 0})
    [held] = q.receive()
    relay.stall()
    for call in (q.receive, held.ack, q.stats, lambda: q.receive(wait=5)):
        error = _fails_in_time(call)
        assert "may have been stored" not in str(error)
    relay.resume()  # the held ack may reach the server now: it is acked once or not at all
    with contextlib.suppress(hailq.LeaseLost):
        held.ack()
    stats = q.stats()
    assert (stats.ready, stats.in_flight) == (0, 0)


def test_rule_31_an_effect_whose_commit_never_answers_fails_in_time(
        stalled: hailq.Broker, relay: StallingRelay) -> None:
    q = stalled.queue("claims")
    q.send({"claim": 0})
    [m] = q.receive()

    def effect_and_ack() -> None:
        with m.transaction() as conn:
            conn.execute("SELECT 1")
            relay.stall()  # the commit goes out and nothing answers

    error = _fails_in_time(effect_and_ack)
    assert "may have been committed" in str(error)
    relay.resume()


def test_rule_31_calls_in_many_threads_all_end_in_time_and_the_broker_recovers(
        stalled: hailq.Broker, relay: StallingRelay) -> None:
    q = stalled.queue("claims")
    q.send({"claim": 0})
    relay.stall()
    took: list[float] = []
    failures: list[BaseException] = []

    def one() -> None:
        t0 = time.monotonic()
        try:
            q.send({"claim": 1})
        except hailq.StorageError as exc:
            failures.append(exc)
        took.append(time.monotonic() - t0)

    threads = [threading.Thread(target=one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT + 10)
    assert not any(t.is_alive() for t in threads), "a call hangs"
    assert len(failures) == 6 and max(took) < TIMEOUT + SLACK, took
    relay.resume()
    q.send({"claim": 2})  # fresh connections: the dropped ones are gone from the pool
    assert q.stats().ready >= 2
