"""Rule 39 in a running worker: its lease renewals follow an operator's change of the
lease within a second, and so do the settings it times by itself. A real worker, both
backends; the operator is another broker on the same database."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import hailq
from hailq import Message
from waiting import wait_for, wait_past


@pytest.fixture
def operator(url: str) -> Iterator[hailq.Broker]:
    other = hailq.connect(url)
    yield other
    other.close()


@contextmanager
def running(broker: hailq.Broker, app: hailq.App, **options: object) -> Iterator[hailq.Worker]:
    worker = hailq.Worker(broker, app, poll=0.2, grace=10, **options)  # type: ignore[arg-type]
    thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False})
    thread.start()
    try:
        wait_for(lambda: worker.state == "running", timeout=10, what="the worker to start")
        yield worker
    finally:
        worker.stop()
        thread.join(20)
        assert not thread.is_alive()


def test_rule_39_renewals_follow_a_lease_shortened_while_the_worker_runs(
        broker: hailq.Broker, operator: hailq.Broker) -> None:
    runs: list[int] = []
    started, finish = threading.Event(), threading.Event()

    def slow(message: Message) -> None:
        runs.append(message.attempt)
        started.set()
        finish.wait(20)  # the handler's work: four seconds or more, until told

    app = hailq.App()
    app.add("claims", slow, lease=30)
    broker.queue("claims", lease=30)
    with running(broker, app, concurrency=2):
        operator.configure("claims", lease=1.5)  # the worker read 30 as it started
        queue = operator.get_queue("claims")
        sent = queue.send("slow")
        assert started.wait(10)

        def lease_until() -> float:
            details = queue.get_message(sent)
            assert details is not None and details.lease_until is not None
            return details.lease_until

        # The handler runs past two ends of the shortened lease: each time the lease
        # read before has ended, a renewal by 1.5 s has moved it on.
        held = wait_for(lambda: (lambda u: u if u - operator.now() <= 1.5 + 0.2 else None)(
            lease_until()), timeout=10, what="a renewal by the shortened lease")
        for _ in range(2):
            wait_past(operator.now, held)
            renewed = lease_until()
            assert renewed > held and renewed - operator.now() <= 1.5 + 0.2  # by 1.5 s
            held = renewed
        finish.set()
        wait_for(lambda: queue.stats().in_flight == 0 and queue.get_message(sent) is None,
                 timeout=10, what="the message to be acked")
    assert runs == [1]  # never redelivered while its handler ran


def test_rule_39_a_running_worker_reads_the_settings_it_times_itself_within_a_second(
        broker: hailq.Broker, operator: hailq.Broker) -> None:
    app = hailq.App()
    app.add("claims", lambda message: None, lease=30, slo={9: 5})
    broker.queue("claims", lease=30, slo={9: 5})
    with running(broker, app) as worker:
        operator.configure("claims", lease=2, slo={9: 1}, max_attempts=9)
        wait_for(lambda: "claims" in worker._queues, timeout=10, what="its queues")
        kept = worker._queues["claims"]
        wait_for(lambda: kept.settings.lease == 2.0, timeout=1.0, what="the new lease")
        assert (kept.settings.slo, kept.settings.max_attempts) == ({9: 1.0}, 9)
        assert kept.overrides == {"lease": 2.0, "max_attempts": 9, "slo": {"9": 1.0}}
