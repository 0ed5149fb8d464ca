"""Crashes and stops of real worker processes (SPEC rules 8, 13 and 23)."""

from __future__ import annotations

import signal
import sqlite3
import time

import pytest

import hailq

from .conftest import StartWorker
from .support import done, started, wait_for

CLAIMS = {"lease": 2, "max_attempts": 3, "retry": {"base": 0.05, "jitter": 0}}


def test_sigkill_mid_handler_loses_nothing_and_the_effect_happens_once(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    claims = broker.queue("claims", **CLAIMS)
    claims.send({"n": 1, "sleep_first": 60})
    doomed = start_worker("handlers:app", "--queue", "claims")
    wait_for(lambda: started(effects), what="the first handler to start")
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(10)
    assert done(effects) == []

    start_worker("handlers:app", "--queue", "claims")
    wait_for(lambda: done(effects), timeout=30, what="the redelivered message to be done")
    # Acked: nothing can deliver it again, so what happened is all that will.
    wait_for(lambda: claims.stats().acked == 1, 30, "its ack")
    assert done(effects) == [1]
    assert [attempt for _, attempt, *_ in started(effects)] == [1, 2]
    stats = claims.stats()
    assert (stats.ready, stats.in_flight, stats.dead) == (0, 0, 0)


def test_sigterm_finishes_in_flight_work_and_exits_0_within_grace(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    claims = broker.queue("claims", **CLAIMS)
    claims.send_many([{"n": n, "sleep": 1.5} for n in range(8)])
    worker = start_worker("handlers:app", "-q", "claims", "--concurrency", "4",
                          "--grace", "20")
    wait_for(lambda: len(started(effects)) == 4, what="four handlers to start")
    stopped_at = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0
    assert time.monotonic() - stopped_at < 10

    first_four = sorted(n for n, *_ in started(effects))
    assert done(effects) == first_four  # in-flight work finished and acked
    stats = claims.stats()
    assert (stats.in_flight, stats.ready) == (0, 4)  # no prefetch: the rest never left

    start_worker("handlers:app", "-q", "claims", "--concurrency", "4")
    wait_for(lambda: len(done(effects)) == 8, what="the rest to be done")
    wait_for(lambda: claims.stats().acked == 8, 30, "their acks")  # none can come back
    starts = started(effects)
    assert sorted(n for n, *_ in starts) == list(range(8))  # nothing finished came back
    assert all(attempt == 1 for _, attempt, *_ in starts)


def test_sigterm_gives_back_what_outlives_the_grace_period(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    slow = broker.queue("slow", lease=60)
    slow.send({"n": 1, "sleep_first": 60})
    worker = start_worker("handlers:work", "--queue", "slow", "--grace", "1")
    wait_for(lambda: started(effects), what="the handler to start")
    stopped_at = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0
    assert time.monotonic() - stopped_at < 8

    # Given back with delay 0: receivable now, long before its 60 s lease would end.
    again = slow.receive(wait=2)
    assert len(again) == 1 and again[0].attempt == 2
    assert done(effects) == []


def test_a_message_on_its_last_attempt_survives_shutdowns(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    """Two deploys in a row catch a long handler on a one-attempt queue: still delivered."""
    slow = broker.queue("slow", lease=60, max_attempts=1, aging=60)
    slow.send({"n": 1, "sleep": 60})
    slow.send({"n": 2})  # sent after it: a give-back must not put it behind this one
    for _ in range(2):
        worker = start_worker("handlers:work", "--queue", "slow", "--grace", "0.5")
        wait_for(lambda: started(effects), what="the handler to start")
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(20) == 0
        assert slow.stats().dead == 0
        (again,) = slow.receive()  # its old place in line: first
        assert again.body["n"] == 1
        again.give_back()
        with pytest.raises(hailq.LeaseLost):
            again.nack()  # given back is settled: the receipt holds nothing now
        assert len(started(effects)) == 1  # only the worker ran the handler
        with sqlite3.connect(effects) as conn:
            conn.execute("DELETE FROM events")
    (m,) = slow.receive()
    assert m.body["n"] == 1 and m.attempt == 5  # 2 workers + 2 receives here + this one
    m.nack(error="it fails for real")  # a real failure past the limit: dead
    assert [d.last_error for d in slow.dead_letters()] == ["it fails for real"]
    errors = [e.error for e in slow.dead_letters()[0].errors]
    assert errors[0] == "the worker stopped before the handler finished (grace 0.5 s)"
    assert errors[1] == "given back untried"


def test_second_signal_gives_back_at_once(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    slow = broker.queue("slow", lease=60)
    slow.send({"n": 1, "sleep_first": 60})
    worker = start_worker("handlers:work", "--queue", "slow", "--grace", "120")
    wait_for(lambda: started(effects), what="the handler to start")
    worker.send_signal(signal.SIGTERM)
    wait_for(lambda: [w for w in broker.workers() if w.pid == worker.pid
                      and w.state == "draining"], 30, "the worker to drain")
    worker.send_signal(signal.SIGINT)
    assert worker.wait(10) == 0
    assert len(slow.receive(wait=2)) == 1


def test_heartbeat_keeps_a_handler_three_times_its_lease_from_redelivery(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    long = broker.queue("long", lease=1)
    long.send({"n": 1, "sleep": 3.2})
    # Two slots: if the lease ended, the idle slot would take the message again.
    start_worker("handlers:work", "--queue", "long", "--concurrency", "2")
    wait_for(lambda: long.stats().acked == 1, timeout=20, what="the long handler's ack")
    # A second claim before the ack would show in the stats (redelivered, in flight)
    # at once; once acked, nobody can claim the message: nothing is left to wait for.
    assert len(started(effects)) == 1
    stats = long.stats()
    assert (stats.redelivered, stats.late_acks, stats.ready, stats.in_flight) == (0, 0, 0, 0)


def test_workers_record_heartbeats_and_mark_themselves_stopped(
        broker: hailq.Broker, start_worker: StartWorker) -> None:
    broker.queue("claims", **CLAIMS)
    worker = start_worker("handlers:app", "-q", "claims", "--concurrency", "3")

    def mine() -> list[hailq.WorkerInfo]:
        return [w for w in broker.workers() if w.pid == worker.pid]

    info = wait_for(mine, what="the worker to register")[0]
    assert (info.state, info.queues, info.concurrency, info.in_flight) == (
        "running", ["claims"], 3, 0)
    first_seen = info.last_seen
    wait_for(lambda: mine()[0].last_seen > first_seen, timeout=10, what="a later heartbeat")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0
    assert mine()[0].state == "stopped"
